import Foundation
import Testing
import PushClient
import PushClock
import PushSecurity
import PushTestSupport
import PushWire
#if canImport(Glibc)
import Glibc
#endif

/// README.md's "Several stores on PostgreSQL", run as written against a server set up as
/// Debian's package sets it up (peer on the socket, scram-sha-256 and TLS on TCP): the
/// role and database made with the README's createuser and createdb, the password typed
/// at their prompts, the password file, init, the copy of the directory for the second
/// store host made right after it, two stores (one on each directory), a gateway and a device.
@Suite("README: several stores on a PostgreSQL server set up as Debian's", .ownThread, .serialized, .enabled(if: PostgresCluster.testsEnabled))
struct ReadmePostgresTests {
    static let heading = "### Several stores on PostgreSQL"

    @Test("createuser --pwprompt, createdb, the password file, init --database with sslmode and passfile, the second host's copy made right after init: both stores serve, each fetches what the other stored, and the device shows what was sent, over TLS connections",
          .timeLimit(.minutes(3)))
    func walkthrough() throws {
        let cluster = try PostgresCluster.start(.debian)
        defer { cluster.stop() }
        let commands = Readme.commands(Readme.shellBlocks(in: try Readme.text(), heading: Self.heading))
        let walkthrough = try Self.walkthrough(commands, on: cluster)
        try walkthrough.start()
        let shown = walkthrough.waitUntilShown()
        // Issue 42, item 3: the copy made right after init holds every file a store host
        // needs; each store opens what the other sealed.
        let across = shown ? try Self.fetchedAcross(walkthrough) : []
        #expect(shown && across == ["stored at 7070, fetched at 7072", "stored at 7072, fetched at 7070"], "\(across)\n\(walkthrough.diagnostics)")
        // While the stores run: every connection of the README's role is encrypted.
        let connections = shown ? try cluster.administer("""
            SELECT count(*) FILTER (WHERE s.ssl) || ' encrypted, ' || count(*) FILTER (WHERE NOT s.ssl) || ' plain'
            FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) WHERE a.usename = 'securepush'
            """) : []
        let status = walkthrough.stop()
        #expect(shown && walkthrough.foregroundDone && walkthrough.deviceText.contains(walkthrough.expectedText),
                "device stdout: \(walkthrough.deviceText.debugDescription)\n\(walkthrough.diagnostics)\nserver log:\n\(cluster.serverLog)")
        #expect(status == 0, "the script exited \(String(describing: status))\n\(walkthrough.diagnostics)")
        for line in walkthrough.exits { #expect(line.hasSuffix(" exited 0"), "SIGTERM: \(line)\n\(walkthrough.diagnostics)") }
        let counts = try #require(connections.first, "no answer about the connections")
        #expect(counts.hasSuffix(" encrypted, 0 plain") && !counts.hasPrefix("0 "), "\(counts)")
        let stored = try cluster.administer("SELECT (rolpassword LIKE 'SCRAM-SHA-256$%')::text FROM pg_authid WHERE rolname = 'securepush'")
        #expect(stored == ["true"], "createuser set a scram password: \(stored)")
        var file = stat()
        #expect(stat(walkthrough.root + "/srv/push2/pgpass", &file) == 0 && file.st_mode & 0o777 == 0o600, "the password file is owner-only")
        // sslmode=require is what keeps it encrypted (libpq's default would fall back to
        // plain TCP): with the server's TLS off, the README's URL no longer connects.
        let deployment = walkthrough.root + "/srv/push2"
        let before = try SecurePushBinary.run(["user", "list", "--data-dir", deployment])
        #expect(before.status == 0 && before.stdout.contains("alice"), "\(before)")
        try cluster.administer("ALTER SYSTEM SET ssl = off")
        try cluster.administer("SELECT pg_reload_conf()::text")
        let plain = waitUntil(timeoutSeconds: 10) {
            (try? cluster.administer("SELECT setting FROM pg_settings WHERE name = 'ssl'")) == ["off"]
        }
        #expect(plain, "the server did not turn TLS off")
        let refused = try SecurePushBinary.run(["user", "list", "--data-dir", deployment])
        #expect(refused.status != 0 && refused.stderr.contains("SSL"), "\(refused)")
    }

    @Test("without the README's password file line, init fails, saying how to give the password", .timeLimit(.minutes(2)))
    func withoutPasswordFile() throws {
        let cluster = try PostgresCluster.start(.debian)
        defer { cluster.stop() }
        let commands = Readme.commands(Readme.shellBlocks(in: try Readme.text(), heading: Self.heading))
        let initIndex = try #require(commands.firstIndex { $0.hasPrefix("securepush init ") })
        #expect(commands[..<initIndex].contains { $0.contains("> /srv/push2/pgpass") }, "the README writes the password file before init")
        // The script is strict: it stops at the first command that fails.
        let walkthrough = try Self.walkthrough(commands.filter { !$0.contains("> /srv/push2/pgpass") }, on: cluster)
        try walkthrough.start()
        let shell = try #require(walkthrough.shell)
        let status = shell.wait(seconds: 60)
        #expect(status != nil && status != 0, "init succeeded without a password file\n\(walkthrough.diagnostics)")
        #expect(shell.standardError.contains("/srv/push2/pgpass (passfile= in the URL) does not exist"), "\(walkthrough.diagnostics)")
        #expect(!walkthrough.foregroundDone)
    }

    /// A payload stored through each of the README's two stores (with the provider key of
    /// the directory it serves), then fetched through the other with a token from LOGIN
    /// there: the texts fetched, `stored at A, fetched at B` with the README's ports.
    static func fetchedAcross(_ walkthrough: OperatorWalkthrough) throws -> [String] {
        let stores = [("7070", "/srv/push2"), ("7072", "/srv/push2-b")]
        var fetched: [String] = []
        for (index, (port, directory)) in stores.enumerated() {
            let (otherPort, _) = stores[1 - index]
            guard let storeAt = walkthrough.ports[port], let fetchAt = walkthrough.ports[otherPort] else {
                throw ReadmeFailure("the walk-through has no stores on 7070 and 7072")
            }
            let deployment = try Deployment.open(walkthrough.root + directory)
            let provider = try BlockingWireClient(host: "127.0.0.1", port: storeAt, timeoutMs: 10_000)
            let credential = HelloCredential.provider(deployment.providerKey).make(for: .store, nowMs: Clocks.wallMilliseconds())
            guard case .helloOK = try provider.hello(Hello(role: .provider, credential: credential)) else {
                throw ReadmeFailure("the store on \(port) refused the provider")
            }
            let text = "stored at \(port), fetched at \(otherPort)"
            let stored = try provider.request(.store(StoreRequest(user: "alice", payload: Array(text.utf8))))
            guard case .storeOK(let ok) = stored else { throw ReadmeFailure("STORE at \(port): \(stored)") }
            let device = try BlockingWireClient(host: "127.0.0.1", port: fetchAt, timeoutMs: 10_000)
            guard case .helloOK = try device.hello(Hello(role: .device)) else { throw ReadmeFailure("the store on \(otherPort) refused the device") }
            let login = try device.request(.login(Login(user: "alice", password: Array("secret".utf8), deviceID: "phone")))
            guard case .loginOK(let token) = login else { throw ReadmeFailure("LOGIN at \(otherPort): \(login)") }
            let reply = try device.request(.fetch(Fetch(id: ok.id, token: token.token)))
            guard case .fetchOK(let payload) = reply else { throw ReadmeFailure("FETCH at \(otherPort) of what \(port) stored: \(reply)") }
            fetched.append(String(decoding: payload.payload, as: UTF8.self))
        }
        return fetched
    }

    /// The README's commands, adapted to the test's server only where they must be: its
    /// port for 5432, its socket directory and port for createuser and createdb (PGHOST,
    /// PGPORT), runuser for sudo (CI has no sudo; not root, the server runs as the
    /// current user, who is its superuser), and the password typed on stdin.
    static func walkthrough(_ commands: [String], on cluster: PostgresCluster) throws -> OperatorWalkthrough {
        let password = "pw-" + UUID().uuidString
        return try OperatorWalkthrough(
            commands: ["scripts/install.sh"] + commands,
            substitutions: ["localhost:5432": "localhost:\(cluster.port)", "sudo -u postgres ": try asServerUser(cluster)],
            environment: ["PGHOST": cluster.directory, "PGPORT": String(cluster.port)],
            input: ["createuser --pwprompt": "\(password)\n\(password)\n", "read -rs password": "\(password)\n"])
    }

    static func asServerUser(_ cluster: PostgresCluster) throws -> String {
        guard geteuid() == 0 else { return "" }
        guard cluster.user == "postgres" else { throw ReadmeFailure("as root, the cluster's superuser is \(cluster.user), not postgres") }
        let candidates = ["/usr/sbin/runuser", "/sbin/runuser"]
        guard let runuser = candidates.first(where: { (path: String) in access(path, X_OK) == 0 }) else {
            throw ReadmeFailure("running the README's `sudo -u postgres` as root needs runuser (util-linux)")
        }
        return "\(runuser) -u postgres -- "
    }
}
