import CLibevent
import Glibc

/// Writes a self-signed P-256 certificate and its private key as PEM files: for tests,
/// development setups and `init`-style tooling on machines without the openssl CLI.
/// The certificate is its own CA, so a client trusts it with `TLSContext.client(caFile:)`.
public enum SelfSignedCertificate {
    /// `subjectAltNames` in OpenSSL's syntax, e.g. `["DNS:localhost", "IP:127.0.0.1"]`.
    /// The key file is created with mode 0600.
    public static func write(
        commonName: String, subjectAltNames: [String], certificatePath: String, privateKeyPath: String,
        validDays: Int = 365
    ) throws(TLSError) {
        guard let key = sp_EVP_EC_gen("P-256") else { throw failure("generating a P-256 key") }
        defer { EVP_PKEY_free(key) }
        guard let certificate = X509_new() else { throw failure("X509_new") }
        defer { X509_free(certificate) }

        var serial: UInt32 = 0
        _ = withUnsafeMutableBytes(of: &serial) { RAND_bytes($0.baseAddress, Int32($0.count)) }
        let subject = X509_get_subject_name(certificate)
        let named = X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC, commonName, -1, -1, 0)
        guard X509_set_version(certificate, 2) == 1,  // v3, needed for extensions
              ASN1_INTEGER_set(X509_get_serialNumber(certificate), Int(serial & 0x7FFF_FFFF)) == 1,
              X509_gmtime_adj(X509_getm_notBefore(certificate), -3600) != nil,
              X509_gmtime_adj(X509_getm_notAfter(certificate), validDays * 86400) != nil,
              X509_set_pubkey(certificate, key) == 1,
              named == 1,
              X509_set_issuer_name(certificate, subject) == 1
        else { throw failure("filling in the certificate") }

        var extensions = [(NID_basic_constraints, "critical,CA:TRUE"), (NID_subject_key_identifier, "hash")]
        if !subjectAltNames.isEmpty {
            extensions.append((NID_subject_alt_name, subjectAltNames.joined(separator: ",")))
        }
        var context = X509V3_CTX()
        X509V3_set_ctx(&context, certificate, certificate, nil, nil, 0)
        for (nid, value) in extensions {
            guard let ext = X509V3_EXT_conf_nid(nil, &context, nid, value) else {
                throw failure("certificate extension \(value)")
            }
            defer { X509_EXTENSION_free(ext) }
            guard X509_add_ext(certificate, ext, -1) == 1 else { throw failure("adding extension \(value)") }
        }
        guard X509_sign(certificate, key, EVP_sha256()) > 0 else { throw failure("signing the certificate") }

        try writePEM(to: certificatePath, mode: 0o644) { PEM_write_X509($0, certificate) }
        try writePEM(to: privateKeyPath, mode: 0o600) { PEM_write_PrivateKey($0, key, nil, nil, 0, nil, nil) }
    }

    private static func writePEM(to path: String, mode: mode_t, _ body: (UnsafeMutablePointer<FILE>) -> Int32)
        throws(TLSError)
    {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
        guard fd >= 0 else { throw .openSSL(operation: "creating \(path)", message: errnoString(errno)) }
        guard let file = fdopen(fd, "w") else {
            Glibc.close(fd)
            throw .openSSL(operation: "creating \(path)", message: errnoString(errno))
        }
        let written = body(file)
        let closed = fclose(file)
        guard written == 1, closed == 0 else { throw failure("writing \(path)") }
    }

    private static func failure(_ operation: String) -> TLSError {
        .openSSL(operation: operation, message: TLSContext.drainErrorQueue() ?? "unknown OpenSSL error")
    }
}
