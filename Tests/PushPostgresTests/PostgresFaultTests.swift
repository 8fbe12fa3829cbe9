import PushEventLoop
import PushPostgres
import PushTestSupport
import Testing

/// A server crash under a connection with requests in flight.
@Suite(.ownThread, .enabled(if: PostgresCluster.testsEnabled, "PostgreSQL is not installed"))
struct PostgresFaultTests {
    @Test("killing the server fails every pending request with .connection, then onClose runs once; after a restart a new connection works")
    func serverCrash() async throws {
        let cluster = try await onOwnThread { try PostgresCluster.start() }
        defer { cluster.stop() }
        let url = try await onOwnThread { try cluster.createDatabase() }
        try crashUnderLoad(cluster, url)
        try await onOwnThread { try cluster.restart() }
        // A loop of its own: the test may resume on another thread after the await.
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let again = try connect(url, on: loop)
        defer { again.close() }
        // Crash recovery kept the table and nothing of the unfinished transaction.
        #expect(try again.run(loop, "SELECT count(*) FROM t").int64(0, 0) == 0)
    }

    private func crashUnderLoad(_ cluster: PostgresCluster, _ url: String) throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let connection = try connect(url, on: loop)
        _ = try connection.run(loop, "CREATE TABLE t (id int8)")

        var events: [String] = []
        var closeError: PostgresError?
        connection.onClose = { error in
            events.append("onClose")
            closeError = error
        }
        connection.query("SELECT pg_sleep(30)") { result in
            events.append(failure(result)?.kind == .connection ? "sleep failed" : "sleep ?")
        }
        connection.transaction([PostgresStatement("INSERT INTO t VALUES (1)"), PostgresStatement("SELECT pg_sleep(30)")]) { result in
            events.append(failure(result)?.kind == .connection ? "transaction failed" : "transaction ?")
        }
        for _ in 0..<3 {
            connection.query("SELECT 1") { result in
                events.append(failure(result)?.kind == .connection ? "select failed" : "select ?")
            }
        }
        #expect(connection.pendingCount == 5)
        // Crash once the requests are surely on the server.
        loop.schedule(after: .milliseconds(200)) { cluster.kill() }
        let start = ContinuousClock.now
        #expect(loop.run(until: { events.contains("onClose") }, timeoutSeconds: 15))
        #expect(ContinuousClock.now - start < .seconds(5))
        loop.runOnce()
        #expect(events == ["sleep failed", "transaction failed", "select failed", "select failed", "select failed", "onClose"])
        #expect(closeError?.kind == .connection)
        #expect(connection.pendingCount == 0)
        #expect(!connection.isOpen)
        // Closed for good: a later request fails too, on the loop.
        let late = try wait(loop) { connection.query("SELECT 1", completion: $0) }
        #expect(failure(late)?.kind == .connection)
    }
}
