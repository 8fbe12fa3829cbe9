import Glibc
import PushEventLoop
import PushPostgres
import PushTestSupport
import Testing

/// Connection strings and connecting: typed errors, no password in any message, and a
/// connect that moves on to another address (libpq replaces its socket).
@Suite(.ownThread) struct PostgresURLTests {
    @Test("an unparsable connection string is .invalidURL naming the problem, never the password")
    func invalidURLs() {
        let cases = [
            "postgresql://ann:hunter2secret@[::1/db",
            "postgresql://ann:hunter2secret@host/db?nonsense=1",
            "postgresql://ann:%zzhunter2secret@host/db",
            "host=db password=hunter2secret bogus",
            "host=db password='hunter2secret",
        ]
        for conninfo in cases {
            do {
                try PostgresURL.validate(conninfo)
                Issue.record("\(PostgresURL.redacted(conninfo)) validated")
            } catch {
                #expect(error.kind == .invalidURL)
                #expect(!error.message.isEmpty)
                #expect(!error.message.contains("hunter2"), "\(error.message)")
                #expect(!error.description.contains("hunter2"))
            }
        }
        #expect(throws: Never.self) { try PostgresURL.validate("postgresql://ann:pw@127.0.0.1:5432/db?connect_timeout=3") }
        #expect(throws: Never.self) { try PostgresURL.validate("host=/tmp dbname=x") }
    }

    @Test("a passfile must be named by an absolute path, in either syntax")
    func relativePassfile() {
        for conninfo in ["postgresql://ann@h/db?passfile=pgpass", "host=h dbname=db passfile='conf/pgpass'"] {
            #expect { try PostgresURL.validate(conninfo) } throws: { error in
                (error as? PostgresError)?.kind == .invalidURL && "\(error)".contains("is not an absolute path")
            }
        }
        #expect(throws: Never.self) { try PostgresURL.validate("postgresql://ann@h/db?sslmode=require&passfile=/srv/push/pgpass") }
    }

    @Test("redacted() masks a password in the user info, the query or a key=value pair")
    func redaction() {
        #expect(PostgresURL.redacted("postgresql://ann:s3cret@h:5432/db") == "postgresql://ann:****@h:5432/db")
        #expect(PostgresURL.redacted("postgres://ann@h/db?sslmode=disable&password=s3cret") == "postgres://ann@h/db?sslmode=disable&password=****")
        #expect(PostgresURL.redacted("host=h password = 's3 cret' user=ann") == "host=h password = '****' user=ann")
        #expect(PostgresURL.redacted("postgresql://ann@h/db") == "postgresql://ann@h/db")
    }
}

@Suite(.ownThread, .enabled(if: PostgresCluster.testsEnabled, "PostgreSQL is not installed"))
struct PostgresConnectTests {
    @Test("a bad URL fails connect with .invalidURL, on the loop, not inside connect()")
    func badURLFailsLater() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        var outcome: Result<PostgresConnection, PostgresError>?
        PostgresConnection.connect("postgresql://ann:hunter2@[::1/db", on: loop) { outcome = $0 }
        #expect(outcome == nil)
        #expect(loop.run(until: { outcome != nil }))
        let error = outcome.flatMap { failure($0) }
        #expect(error?.kind == .invalidURL)
        #expect(error.map { !$0.message.contains("hunter2") } ?? false)
    }

    @Test("connecting to a port nobody listens on fails with .connection")
    func closedPortRefused() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let port = try freeLoopbackPort()
        let start = ContinuousClock.now
        let result = try wait(loop) { PostgresConnection.connect("postgresql://postgres@127.0.0.1:\(port)/x", on: loop, completion: $0) }
        #expect(failure(result)?.kind == .connection)
        #expect(ContinuousClock.now - start < .seconds(5))
    }

    @Test("a connect that rejects its first server mid-handshake moves to the second host on a new socket, and the loop follows it")
    func secondHostAfterFirstRejected() async throws {
        let url = try await freshDatabase()
        let cluster = try await sharedCluster()
        let database = String(url.split(separator: "/").last ?? "")
        let loop = try EventLoop()
        defer { loop.shutdown() }
        // The first "server" completes the startup handshake but reports itself read-only,
        // so libpq (asked for a read-write session) says goodbye, closes that socket after
        // several PQconnectPoll steps on it, and opens another to the real server.
        let fake = try ReadOnlyServer(loop: loop)
        defer { fake.stop() }
        let conninfo = """
            host=127.0.0.1,127.0.0.1 port=\(fake.port),\(cluster.port) user=\(cluster.user) dbname=\(database) \
            target_session_attrs=read-write sslmode=disable gssencmode=disable
            """
        let connection = try connect(conninfo, on: loop)
        defer { connection.close() }
        #expect(fake.handshakes == 1)
        #expect(try connection.run(loop, "SELECT 41 + 1").int32(0, 0) == 42)
    }

    @Test("connecting to a port nobody listens on, then to the server, on one connection string")
    func secondHostAfterFirstRefuses() async throws {
        let url = try await freshDatabase()
        let cluster = try await sharedCluster()
        let database = String(url.split(separator: "/").last ?? "")
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let conninfo = "host=127.0.0.1,127.0.0.1 port=\(try freeLoopbackPort()),\(cluster.port) user=\(cluster.user) dbname=\(database)"
        let connection = try connect(conninfo, on: loop)
        defer { connection.close() }
        #expect(try connection.run(loop, "SELECT 1").int32(0, 0) == 1)
    }
}
