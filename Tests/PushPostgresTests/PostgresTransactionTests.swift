import PushEventLoop
import PushPostgres
import PushTestSupport
import Testing

/// `transaction`: one round trip, all or nothing, and nothing left behind that would
/// disturb the requests pipelined after it.
@Suite(.ownThread, .enabled(if: PostgresCluster.testsEnabled, "PostgreSQL is not installed"))
struct PostgresTransactionTests {
    @Test("a transaction commits every statement and returns one result each")
    func commitsAll() async throws {
        let url = try await freshDatabase()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let connection = try connect(url, on: loop)
        defer { connection.close() }
        _ = try connection.run(loop, "CREATE TABLE items (id int8 PRIMARY KEY, body bytea)")
        let results = try wait(loop) { completion in
            connection.transaction([
                PostgresStatement("INSERT INTO items VALUES ($1, $2)", [.int64(1), .bytes([1])]),
                PostgresStatement("INSERT INTO items VALUES ($1, $2)", [.int64(2), .bytes([2])]),
                PostgresStatement("UPDATE items SET body = $1 WHERE id = $2", [.bytes([9]), .int64(1)]),
                PostgresStatement("SELECT count(*) FROM items"),
            ], completion: completion)
        }.get()
        #expect(results.map(\.affectedRows) == [1, 1, 1, 1])
        #expect(try results[3].int64(0, 0) == 2)
        #expect(try connection.run(loop, "SELECT body FROM items WHERE id = 1").bytes(0, 0) == [9])
        let empty = try wait(loop) { connection.transaction([], completion: $0) }.get()
        #expect(empty.isEmpty)
    }

    @Test("a failing statement rolls back the ones before it, and the requests pipelined behind run normally")
    func rollsBackAll() async throws {
        let url = try await freshDatabase()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let connection = try connect(url, on: loop)
        defer { connection.close() }
        _ = try connection.run(loop, "CREATE TABLE items (id int8 PRIMARY KEY)")
        _ = try connection.run(loop, "INSERT INTO items VALUES (1)")

        var transactionOutcome: Result<[PostgresResult], PostgresError>?
        var after: [Result<PostgresResult, PostgresError>] = []
        connection.query("INSERT INTO items VALUES (10)") { after.append($0) }
        connection.transaction([
            PostgresStatement("INSERT INTO items VALUES (2)"),
            PostgresStatement("INSERT INTO items VALUES (3)"),
            PostgresStatement("INSERT INTO items VALUES (1)"),
            PostgresStatement("INSERT INTO items VALUES (4)"),
        ]) { transactionOutcome = $0 }
        // Already in the pipeline when the transaction fails.
        connection.query("INSERT INTO items VALUES (11)") { after.append($0) }
        connection.transaction([PostgresStatement("INSERT INTO items VALUES (12)")]) { result in
            after.append(result.map { $0.first ?? PostgresResult() })
        }
        #expect(loop.run(until: { transactionOutcome != nil && after.count == 3 }))
        let error = transactionOutcome.flatMap { failure($0) }
        #expect(error?.kind == .server)
        #expect(error?.sqlState == "23505")
        #expect(after.allSatisfy { (try? $0.get().affectedRows) == 1 })
        let ids = try connection.run(loop, "SELECT id FROM items ORDER BY id").rows
        #expect(ids == [[.int64(1)], [.int64(10)], [.int64(11)], [.int64(12)]])
    }

    @Test("a failure at commit (a deferred constraint) fails the transaction and keeps nothing")
    func commitTimeFailure() async throws {
        let url = try await freshDatabase()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let connection = try connect(url, on: loop)
        defer { connection.close() }
        _ = try connection.run(loop, "CREATE TABLE items (id int8 UNIQUE DEFERRABLE INITIALLY DEFERRED)")
        let outcome = try wait(loop) { completion in
            connection.transaction([
                PostgresStatement("INSERT INTO items VALUES (5)"),
                PostgresStatement("INSERT INTO items VALUES (5)"),
            ], completion: completion)
        }
        #expect(failure(outcome)?.sqlState == "23505")
        #expect(try connection.run(loop, "SELECT count(*) FROM items").int64(0, 0) == 0)
    }

    @Test("a statement refused before sending (a NUL in the SQL) sends none of the transaction")
    func refusedBeforeSending() async throws {
        let url = try await freshDatabase()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let connection = try connect(url, on: loop)
        defer { connection.close() }
        _ = try connection.run(loop, "CREATE TABLE items (id int8)")
        let outcome = try wait(loop) { completion in
            connection.transaction([
                PostgresStatement("INSERT INTO items VALUES (1)"),
                PostgresStatement("INSERT INTO items VALUES (2)\u{0}"),
            ], completion: completion)
        }
        #expect(failure(outcome)?.kind == .protocolViolation)
        #expect(try connection.run(loop, "SELECT count(*) FROM items").int64(0, 0) == 0)
    }
}
