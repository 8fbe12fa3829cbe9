import Foundation
import Testing
import PushClient
import PushEventLoop
import PushProcess
import PushSecurity
import PushSession
import PushTestSupport

/// What `securepush` prints for a person, run as real processes: help with defaults and
/// units, local ISO 8601 times, one clear line per failure, addresses by name and IPv6.
@Suite("securepush client commands: what a person reads", .ownThread, .serialized)
struct CommandMessageTests {
    /// A service process listening on `listen` (not the 127.0.0.1 that `ServiceProcess` uses).
    final class Service {
        let child: ChildProcess
        let announced: String
        let port: Int

        init(_ arguments: [String], listen: String) throws {
            child = try ChildProcess(executable: SecurePushBinary.path, arguments: arguments + ["--listen", listen])
            announced = try child.waitForLine(prefix: "listening on ", seconds: 30)
            guard let port = Int(announced.split(separator: ":").last ?? "") else { throw ServiceError.failed("bad address \(announced)") }
            self.port = port
        }

        deinit { child.terminate(graceSeconds: 10) }
    }

    /// A self-signed certificate for localhost and 127.0.0.1, and another one no server uses.
    final class Certificates {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cli-tls-\(UUID().uuidString)").path
        var certificate: String { directory + "/server.pem" }
        var key: String { directory + "/server.key" }
        var otherCertificate: String { directory + "/other.pem" }

        init() throws {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            for name in ["server", "other"] {
                try SelfSignedCertificate.write(commonName: "localhost", subjectAltNames: ["DNS:localhost", "IP:127.0.0.1"],
                                                certificatePath: "\(directory)/\(name).pem", privateKeyPath: "\(directory)/\(name).key")
            }
        }

        deinit { try? FileManager.default.removeItem(atPath: directory) }
    }

    /// `securepush ARGUMENTS` with the time zone set (a POSIX TZ string needs no tzdata).
    static func run(_ arguments: [String], timeZone: String = "UTC0", stdin: String? = nil, seconds: Double = 60) throws
        -> (status: Int32, stdout: String, stderr: String)
    {
        try ChildProcess.run(executable: "/usr/bin/env", arguments: ["TZ=\(timeZone)", SecurePushBinary.path] + arguments,
                             stdinText: stdin, seconds: seconds)
    }

    static func status(_ deployment: TemporaryDeployment, store: String, extra: [String] = []) throws -> (status: Int32, stdout: String, stderr: String) {
        try run(["status", "--store", store, "--provider-key", deployment.directory + "/" + Deployment.providerKeyFile,
                 "--timeout", "5"] + extra + [String(repeating: "ab", count: 16)])
    }

    /// An ISO 8601 local time to the second with the offset: 2025-06-01T14:03:22+02:30.
    static var isoPattern: Regex<Substring> { #/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[+-]\d{2}:\d{2}/# }

    @Test("--help shows defaults with their units, never a Swift value dump")
    func helpDefaults() throws {
        let send = try Self.run(["send", "--help"])
        #expect(send.status == 0)
        #expect(send.stdout.contains("(default: 86400 seconds = 1"), "\(send.stdout)")
        #expect(send.stdout.contains("(default: 10 seconds)"), "\(send.stdout)")
        #expect(send.stdout.contains("--store <host:port>"))
        #expect(!send.stdout.contains("TimeToLive("), "\(send.stdout)")
        for command in [["status"], ["recall"], ["device", "run"], ["device", "login"]] {
            let help = try Self.run(command + ["--help"])
            #expect(help.status == 0)
            #expect(help.stdout.contains("<host:port>"), "\(command): \(help.stdout)")
            #expect(!help.stdout.contains("TimeToLive(") && !help.stdout.contains("Seconds("), "\(command): \(help.stdout)")
        }
    }

    @Test("times are ISO 8601 in local time: send, status and device login")
    func localTimes() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let store = try ServiceProcess(["store", "--data-dir", deployment.directory])
        let gateway = try ServiceProcess(["gateway", "--data-dir", deployment.directory])
        let zone = "XST-02:30"  // two and a half hours east of UTC
        let sent = try Self.run(["send", "--store", "127.0.0.1:\(store.port)", "--gateway", "127.0.0.1:\(gateway.port)",
                                 "--provider-key", deployment.directory + "/" + Deployment.providerKeyFile,
                                 "--to", "user:alice", "--text", "hello", "--ttl", "2h"], timeZone: zone)
        #expect(sent.status == 0, "\(sent.stderr)")
        let lines = sent.stdout.split(separator: "\n")
        let id = try #require(lines.first { $0.hasPrefix("id ") }.map { String($0.dropFirst(3)) })
        let until = try #require(lines.first { $0.hasPrefix("readable until ") }, "\(sent.stdout)")
        #expect(until.firstMatch(of: Self.isoPattern)?.output.hasSuffix("+02:30") == true, "\(until)")

        let status = try Self.run(["status", "--store", "127.0.0.1:\(store.port)",
                                   "--provider-key", deployment.directory + "/" + Deployment.providerKeyFile, id], timeZone: zone)
        #expect(status.status == 0, "\(status.stderr)")
        #expect(!status.stdout.contains(" ms"), "no epoch milliseconds: \(status.stdout)")
        let expires = try #require(status.stdout.firstMatch(of: Self.isoPattern)?.output, "\(status.stdout)")
        // The TTL was two hours: the expiry, read back in UTC, is two hours from now, give or take.
        let parsed = try #require(ISO8601DateFormatter().date(from: String(expires)))
        #expect(abs(parsed.timeIntervalSinceNow - 7_200) < 120, "\(expires)")

        try deployment.enroll("phone")
        let login = try Self.run(["device", "login", "--store", "localhost:\(store.port)", "--user", "alice", "--device", "phone",
                                  "--state-dir", deployment.directory + "/phone"], timeZone: zone, stdin: "alice-pw\n")
        #expect(login.status == 0, "\(login.stderr)")
        #expect(login.stdout.contains("token valid until "), "\(login.stdout)")
        #expect(login.stdout.firstMatch(of: Self.isoPattern)?.output.hasSuffix("+02:30") == true, "\(login.stdout)")
    }

    @Test("services listen on [::1] and on localhost; clients connect by name; a bad name is one clear line")
    func addresses() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let store = try Service(["store", "--data-dir", deployment.directory], listen: "[::1]:0")
        let gateway = try Service(["gateway", "--data-dir", deployment.directory, "--metrics", "[::1]:0"], listen: "localhost:0")
        #expect(store.announced.hasPrefix("[::1]:"), "\(store.announced)")
        // The metrics endpoint answers over IPv6 too.
        let metricsLine = gateway.child.standardOutput.split(separator: "\n").first { $0.hasPrefix("metrics on ") }
        let metricsPort = try #require(metricsLine.flatMap { Int($0.split(separator: ":").last ?? "") }, "\(gateway.child.standardOutput)")
        let scrape = try BlockingWireClient(host: "::1", port: metricsPort)
        try scrape.sendRaw(Array("GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8))
        #expect(scrape.readAll().hasPrefix("HTTP/1.1 200"))
        let sent = try Self.run(["send", "--store", "[::1]:\(store.port)", "--gateway", "localhost:\(gateway.port)",
                                 "--provider-key", deployment.directory + "/" + Deployment.providerKeyFile,
                                 "--to", "user:alice", "--text", "by name"])
        #expect(sent.status == 0, "\(sent.stderr)")
        #expect(sent.stdout.hasPrefix("id "))

        let unknown = try Self.status(deployment, store: "nohost.invalid:7070")
        #expect(unknown.status == 1)
        #expect(unknown.stderr.split(separator: "\n").count == 1, "\(unknown.stderr)")
        #expect(unknown.stderr.contains("cannot resolve 'nohost.invalid'"), "\(unknown.stderr)")
    }

    @Test("plain TCP to a TLS store, TLS to a plain store and a CA that does not match: one line each, at once")
    func tlsMismatchLines() throws {
        let certificates = try Certificates()
        let deployment = try TemporaryDeployment()
        let tlsStore = try ServiceProcess(["store", "--data-dir", deployment.directory,
                                           "--tls-cert", certificates.certificate, "--tls-key", certificates.key])
        let plainDeployment = try TemporaryDeployment()
        let plainStore = try ServiceProcess(["store", "--data-dir", plainDeployment.directory])
        let cases: [(store: Int, extra: [String], expected: String)] = [
            (tlsStore.port, [], "speaks TLS: pass --ca-file"),
            (plainStore.port, ["--ca-file", certificates.certificate], "does not speak TLS"),
            (tlsStore.port, ["--ca-file", certificates.otherCertificate], "failed TLS verification: certificate verify failed: "),
        ]
        for (port, extra, expected) in cases {
            // The message itself shows it was answered, not timed out (that would say "timed out").
            let result = try Self.status(deployment, store: "127.0.0.1:\(port)", extra: extra)
            #expect(result.status == 1)
            #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
            #expect(result.stderr.contains(expected), "\(extra): \(result.stderr)")
            #expect(!result.stderr.contains("error:") && !result.stderr.contains("routines"), "\(result.stderr)")
        }
    }
}
