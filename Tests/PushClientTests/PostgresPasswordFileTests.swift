import Foundation
import Testing
import PushTestSupport

/// What `init --database` says when the password cannot reach a server set up as
/// Debian's (scram-sha-256 on TCP, peer on the socket): each message names the problem
/// and what to do, and none shows a password.
@Suite("PostgreSQL password files and authentication failures", .ownThread, .serialized, .enabled(if: PostgresCluster.testsEnabled))
final class PostgresPasswordFileTests {
    let cluster: PostgresCluster
    let role: String
    let password = "pw-" + UUID().uuidString
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("securepush-pgpass-\(UUID().uuidString)").path

    init() throws {
        cluster = try PostgresCluster.shared(.debian)
        role = "role_" + UUID().uuidString.prefix(8).lowercased()
        try cluster.administer("CREATE ROLE \(role) LOGIN PASSWORD '\(password)'")
        try cluster.administer("CREATE DATABASE \(role) OWNER \(role)")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    func url(passfile: String?) -> String {
        let base = "postgresql://\(role)@localhost:\(cluster.port)/\(role)?sslmode=require"
        return passfile.map { base + "&passfile=" + $0 } ?? base
    }

    /// A password file with the line for the role, with `mode`.
    func passwordFile(_ name: String, password: String? = nil, mode: Int) throws -> String {
        let path = root + "/" + name
        try "localhost:\(cluster.port):\(role):\(role):\(password ?? self.password)\n".write(toFile: path, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
        return path
    }

    /// `init --database url` into a new directory; its exit status and stderr.
    func initDeployment(_ url: String) throws -> (status: Int32, stderr: String) {
        let directory = root + "/deployment-" + UUID().uuidString
        let result = try SecurePushBinary.run(["init", directory, "--database", url])
        #expect(!result.stderr.contains(password), "a password in the message: \(result.stderr)")
        return (result.status, result.stderr)
    }

    @Test("an owner-only password file works; one group or others can read is refused by name, with the chmod that fixes it")
    func permissions() throws {
        let good = try passwordFile("good", mode: 0o600)
        let made = try initDeployment(url(passfile: good))
        #expect(made.status == 0, "\(made.stderr)")
        let loose = try passwordFile("loose", mode: 0o644)
        let refused = try initDeployment(url(passfile: loose))
        #expect(refused.status != 0 && refused.stderr.contains("\(loose) (passfile= in the URL) has mode 644")
                && refused.stderr.contains("chmod 600 \(loose)"), "\(refused.stderr)")
    }

    @Test("a relative passfile, a missing one and a directory are each refused by name")
    func paths() throws {
        let relative = try initDeployment(url(passfile: "pgpass"))
        #expect(relative.status != 0 && relative.stderr.contains("passfile=pgpass is not an absolute path"), "\(relative.stderr)")
        let missing = try initDeployment(url(passfile: root + "/nowhere"))
        #expect(missing.status != 0 && missing.stderr.contains("\(root)/nowhere (passfile= in the URL) does not exist"), "\(missing.stderr)")
        let directory = try initDeployment(url(passfile: root))
        #expect(directory.status != 0 && directory.stderr.contains("is not a plain file"), "\(directory.stderr)")
    }

    @Test("no password, a wrong one, and the Unix socket: libpq's message and what to do")
    func authenticationFailures() throws {
        let none = try initDeployment(url(passfile: nil))
        #expect(none.status != 0 && none.stderr.contains("no password supplied")
                && none.stderr.contains("add passfile=/ABSOLUTE/PATH to the URL"), "\(none.stderr)")
        let wrong = try passwordFile("wrong", password: "not-" + password, mode: 0o600)
        let refused = try initDeployment(url(passfile: wrong))
        #expect(refused.status != 0 && refused.stderr.contains("password authentication failed")
                && refused.stderr.contains("is not the role's"), "\(refused.stderr)")
        let good = try passwordFile("socket", mode: 0o600)
        let socket = try initDeployment("postgresql://\(role)@/\(role)?host=\(cluster.directory)&port=\(cluster.port)&passfile=\(good)")
        #expect(socket.status != 0 && socket.stderr.contains("Peer authentication failed")
                && socket.stderr.contains("connect over TCP"), "\(socket.stderr)")
    }
}
