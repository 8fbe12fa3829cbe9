import Foundation
import PushProcess

/// A throwaway CA in a directory of its own, signing P-256 leaf certificates with the
/// openssl command (as the README's TLS cluster does): for servers and clients whose
/// certificates must chain to one CA, which `SelfSignedCertificate` cannot make.
public final class TestCertificateAuthority {
    public let directory: String
    public let name: String
    public var certificateFile: String { directory + "/\(name)-ca.pem" }
    private var keyFile: String { directory + "/\(name)-ca.key" }

    /// - Parameter directory: created if missing; the caller removes it.
    public init(name: String, in directory: String) throws {
        self.directory = directory
        self.name = name
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Self.openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
                          "-subj", "/CN=\(name) test CA", "-keyout", keyFile, "-out", certificateFile])
    }

    /// A certificate for `commonName` signed by this CA, and its key (mode 0600).
    /// - Parameter subjectAltNames: OpenSSL syntax, as in `IP:127.0.0.1,DNS:localhost`.
    public func issue(_ commonName: String, subjectAltNames: String? = nil) throws -> (certificate: String, key: String) {
        let base = directory + "/" + commonName
        var arguments = ["req", "-x509", "-CA", certificateFile, "-CAkey", keyFile, "-newkey", "ec",
                         "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj", "/CN=\(commonName)",
                         "-addext", "basicConstraints=critical,CA:FALSE", "-keyout", base + ".key", "-out", base + ".pem"]
        if let subjectAltNames { arguments += ["-addext", "subjectAltName=\(subjectAltNames)"] }
        try Self.openssl(arguments)
        return (base + ".pem", base + ".key")
    }

    public static let binary: String? = ["/usr/bin/openssl", "/usr/local/bin/openssl"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    private static func openssl(_ arguments: [String]) throws {
        guard let binary else { throw ServiceError.failed("openssl not found (/usr/bin/openssl): install Debian's openssl package") }
        let result = try ChildProcess.run(executable: binary, arguments: arguments, seconds: 60)
        guard result.status == 0 else { throw ServiceError.failed("openssl \(arguments.joined(separator: " ")) failed: \(result.stderr)") }
    }
}
