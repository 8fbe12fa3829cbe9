import CLibevent
import Glibc

/// An OpenSSL `SSL_CTX`: certificates, trust, protocol floor (TLS 1.2).
///
/// `@unchecked Sendable` because an `SSL_CTX` that is no longer being configured may be
/// shared by any number of threads creating `SSL` objects from it (OpenSSL locks its
/// internals), and this class exposes no way to configure it after init. One context
/// can therefore serve listeners on several loop threads.
public final class TLSContext: @unchecked Sendable {
    let context: OpaquePointer
    public let isServer: Bool

    /// The text of the GOAWAY a TLS listener sends a client that spoke plain securepush
    /// to it; a client that receives it knows to connect with TLS.
    public static let plainClientNotice = "this port speaks TLS: connect with TLS (securepush: --ca-file)"

    private init(context: OpaquePointer, isServer: Bool) {
        self.context = context
        self.isServer = isServer
    }

    deinit { SSL_CTX_free(context) }

    /// A server context from PEM files (the certificate file may hold the whole chain).
    public static func server(certificateFile: String, privateKeyFile: String) throws(TLSError) -> TLSContext {
        let context = try makeContext(method: TLS_server_method(), isServer: true)
        guard SSL_CTX_use_certificate_chain_file(context.context, certificateFile) == 1 else {
            throw failure("loading certificate \(certificateFile)")
        }
        guard SSL_CTX_use_PrivateKey_file(context.context, privateKeyFile, SSL_FILETYPE_PEM) == 1 else {
            throw failure("loading private key \(privateKeyFile)")
        }
        guard SSL_CTX_check_private_key(context.context) == 1 else {
            throw failure("private key does not match the certificate")
        }
        return context
    }

    /// A client context that verifies the server against `caFile` (PEM), or against
    /// the system trust store when `caFile` is nil.
    public static func client(caFile: String?) throws(TLSError) -> TLSContext {
        let context = try makeContext(method: TLS_client_method(), isServer: false)
        if let caFile {
            guard SSL_CTX_load_verify_locations(context.context, caFile, nil) == 1 else {
                throw failure("loading CA file \(caFile)")
            }
        } else if SSL_CTX_set_default_verify_paths(context.context) != 1 {
            throw failure("loading the system trust store")
        }
        SSL_CTX_set_verify(context.context, SSL_VERIFY_PEER, nil)
        return context
    }

    private static func makeContext(method: OpaquePointer?, isServer: Bool) throws(TLSError) -> TLSContext {
        guard let method, let raw = SSL_CTX_new(method) else { throw failure("SSL_CTX_new") }
        let context = TLSContext(context: raw, isServer: isServer)
        guard sp_SSL_CTX_set_min_tls12(raw) == 1 else { throw failure("setting TLS 1.2 as the minimum") }
        // Idle connections hand their 16 KiB record buffers back: most of our
        // connections are idle most of the time.
        _ = sp_SSL_CTX_set_mode(raw, Int(SSL_MODE_RELEASE_BUFFERS))
        return context
    }

    private static func failure(_ operation: String) -> TLSError {
        .openSSL(operation: operation, message: drainErrorQueue() ?? "unknown OpenSSL error")
    }

    // MARK: - Per-connection helpers

    /// A server-side SSL object for an accepted socket.
    func makeServerSSL() -> OpaquePointer? { SSL_new(context) }

    /// A client-side SSL object that sends SNI for host names and checks the
    /// certificate against `serverName` (a DNS name or an IP literal).
    func makeClientSSL(serverName: String?) -> Result<OpaquePointer, ConnectError> {
        guard let ssl = SSL_new(context) else {
            return .failure(.tls(TLSContext.drainErrorQueue() ?? "SSL_new failed"))
        }
        guard let serverName, !serverName.isEmpty else { return .success(ssl) }
        let isIPLiteral = (try? SocketAddress(host: serverName, port: 0)) != nil
        let ok: Bool
        if isIPLiteral {
            // SNI must not carry an IP address (RFC 6066); verify against IP SANs instead.
            let bare = serverName.hasPrefix("[") ? String(serverName.dropFirst().dropLast()) : serverName
            ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), bare) == 1
        } else {
            ok = sp_SSL_set_tlsext_host_name(ssl, serverName) == 1 && SSL_set1_host(ssl, serverName) == 1
        }
        guard ok else {
            SSL_free(ssl)
            return .failure(.tls(TLSContext.drainErrorQueue() ?? "cannot set the expected server name"))
        }
        return .success(ssl)
    }

    /// What went wrong on a failed bufferevent, from the errors libevent took off
    /// OpenSSL's queue, what is left there, and the certificate verification result.
    static func failure(for bev: OpaquePointer) -> OpenSSLFailure {
        var failure = OpenSSLFailure()
        // libevent hands its saved codes back newest first.
        var saved: [UInt] = []
        var code = bufferevent_get_openssl_error(bev)
        while code != 0 {
            saved.append(code)
            code = bufferevent_get_openssl_error(bev)
        }
        failure.add(saved.reversed())
        failure.add(takeErrorQueue())
        if let ssl = bufferevent_openssl_get_ssl(bev) {
            let verify = SSL_get_verify_result(ssl)
            if verify != X509_V_OK, let text = X509_verify_cert_error_string(verify) {
                failure.verification = String(cString: text)
            }
        }
        return failure
    }

    /// Best effort: one non-blocking close_notify so the peer sees a clean TLS close.
    static func sendCloseNotify(_ bev: OpaquePointer) {
        guard let ssl = bufferevent_openssl_get_ssl(bev) else { return }
        if SSL_is_init_finished(ssl) == 1 { _ = SSL_shutdown(ssl) }
        ERR_clear_error()
    }

    /// OpenSSL's queued errors as one line (see `OpenSSLFailure.message`); nil if none.
    static func drainErrorQueue() -> String? {
        var failure = OpenSSLFailure()
        failure.add(takeErrorQueue())
        return failure.isEmpty ? nil : failure.message
    }

    private static func takeErrorQueue() -> [UInt] {
        var codes: [UInt] = []
        var code = ERR_get_error()
        while code != 0 {
            codes.append(code)
            code = ERR_get_error()
        }
        return codes
    }
}

/// One OpenSSL failure in words a person can read on one line: the reasons from the
/// error queue, the outermost first, then the certificate verification result, e.g.
/// "certificate verify failed: self-signed certificate". Library and function names,
/// hex codes and generic links of the chain ("system lib", "PEM lib") are left out.
struct OpenSSLFailure {
    /// Packed error codes, oldest (innermost) first.
    private(set) var codes: [UInt] = []
    var verification: String?

    var isEmpty: Bool { codes.isEmpty && verification == nil }

    mutating func add(_ more: some Sequence<UInt>) {
        // libevent also records SSL_get_error() results (SSL_ERROR_SSL, SSL_ERROR_SYSCALL)
        // among the packed codes; they carry no library (bits 23 and up) and no reason.
        codes += more.filter { $0 >> 23 != 0 }
    }

    var message: String {
        var reasons: [String] = []
        for code in codes.reversed() {
            let text = OpenSSLFailure.reason(code)
            if reasons.last != text { reasons.append(text) }
        }
        let specific = reasons.filter { !$0.hasSuffix(" lib") }
        if !specific.isEmpty { reasons = specific }
        if let verification, !reasons.contains(verification) { reasons.append(verification) }
        return reasons.isEmpty ? "unknown OpenSSL error" : reasons.joined(separator: ": ")
    }

    /// The handshake read bytes that are not a TLS record: the peer speaks something
    /// else (a plain securepush server answering with a GOAWAY frame, an HTTP server).
    var peerIsNotTLS: Bool {
        verification == nil && codes.contains { code in
            guard code & OpenSSLFailure.systemErrorFlag == 0 else { return false }
            let reason = Int32(truncatingIfNeeded: code & 0x7F_FFFF)
            return reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG
                || reason == SSL_R_HTTP_REQUEST || reason == SSL_R_HTTPS_PROXY_REQUEST
        }
    }

    /// OpenSSL 3 packs an errno from the C library as the flag bit 31 and the errno.
    private static let systemErrorFlag: UInt = 1 << 31

    /// The peer closed the socket in the middle of the handshake, without an alert.
    var peerClosedEarly: Bool {
        verification == nil && codes.contains { code in
            code & OpenSSLFailure.systemErrorFlag == 0
                && Int32(truncatingIfNeeded: code & 0x7F_FFFF) == SSL_R_UNEXPECTED_EOF_WHILE_READING
        }
    }

    private static func reason(_ code: UInt) -> String {
        if code & systemErrorFlag != 0 {
            return String(cString: strerror(Int32(truncatingIfNeeded: code & (systemErrorFlag - 1))))
        }
        if let text = ERR_reason_error_string(code) { return String(cString: text) }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
