#if canImport(Glibc)
import Glibc
#endif
import Foundation
import PushEventLoop

/// The `.debian` setup: what Debian's postgresql package changes from initdb's defaults
/// (pg_hba.conf, password_encryption, ssl with the snakeoil certificate), so that the
/// README's commands meet the server an operator gets from `apt-get install postgresql`.
extension PostgresCluster {
    /// Debian's pg_hba.conf, less its replication lines.
    static let debianHBA = """
        local   all             postgres                                peer
        local   all             all                                     peer
        host    all             all             127.0.0.1/32            scram-sha-256
        host    all             all             ::1/128                 scram-sha-256

        """

    /// In postgresql.conf, as Debian has them, rather than on the command line: a test may
    /// then change them with ALTER SYSTEM and a reload.
    static let debianSettings = """

        # Debian's postgresql package
        password_encryption = scram-sha-256
        ssl = on
        ssl_cert_file = 'server.crt'
        ssl_key_file = 'server.key'

        """

    /// Host and local methods are set in pg_hba.conf afterwards; the superuser gets a
    /// password (scram, from a file the server's user can read) so that `administer` and
    /// `createDatabase` can log in over TCP as Debian's would need one.
    func debianInitdbArguments() throws -> [String] {
        guard let superuserPassword else { throw PostgresClusterError("the .debian setup has no superuser password") }
        let file = directory + "/superuser-password"
        try writeServerFile(file, superuserPassword + "\n", mode: 0o600)
        return ["--pwfile=\(file)", "--auth-host=scram-sha-256", "--auth-local=peer"]
    }

    /// A self-signed certificate for localhost in the data directory, its key owner-only
    /// and owned by the server's user, as the server insists.
    func writeDebianCertificate() throws {
        let certificate = dataDirectory + "/server.crt"
        let key = dataDirectory + "/server.key"
        do {
            try SelfSignedCertificate.write(commonName: "localhost", subjectAltNames: ["DNS:localhost", "IP:127.0.0.1", "IP:::1"],
                                            certificatePath: certificate, privateKeyPath: key, validDays: 2)
        } catch {
            throw PostgresClusterError("cannot write the server's certificate: \(error)")
        }
        for path in [certificate, key] { try giveToServer(path) }
    }

    /// Appends `debianSettings` to initdb's postgresql.conf (keeping its owner).
    func writeDebianSettings() throws {
        let path = dataDirectory + "/postgresql.conf"
        let fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC)
        guard fd >= 0 else { throw PostgresClusterError("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let bytes = Array(Self.debianSettings.utf8)
        guard bytes.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == bytes.count else {
            throw PostgresClusterError("cannot write \(path)")
        }
    }

    /// Hex of 16 random bytes.
    static func randomPassword() -> String {
        (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    private func writeServerFile(_ path: String, _ text: String, mode: mode_t) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else { throw PostgresClusterError("cannot create \(path): \(String(cString: strerror(errno)))") }
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        guard written == bytes.count else { throw PostgresClusterError("cannot write \(path)") }
        try giveToServer(path)
    }

    private func giveToServer(_ path: String) throws {
        guard let owner else { return }
        guard chown(path, owner.uid, owner.gid) == 0 else {
            throw PostgresClusterError("chown \(path) failed: \(String(cString: strerror(errno)))")
        }
    }
}
