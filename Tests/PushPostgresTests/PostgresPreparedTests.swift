import PushEventLoop
import PushPostgres
import PushTestSupport
import Testing

/// Protocol-level prepared statements (`PostgresStatement.prepared`) and array parameters.
@Suite(.ownThread, .enabled(if: PostgresCluster.testsEnabled, "PostgreSQL is not installed"))
struct PostgresPreparedTests {
    @Test("a prepared statement is parsed once per connection and parameter types, then reused; pipelined from its first use")
    func preparesOnce() async throws {
        let url = try await freshDatabase()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let connection = try connect(url, on: loop)
        defer { connection.close() }

        // 100 uses sent in one turn, the first of which prepares: all answered, in order.
        var answers: [Int64] = []
        for index in 0..<100 {
            connection.query(PostgresStatement("SELECT $1::int8 + 1", [.int64(Int64(index))], prepared: true)) { result in
                answers.append((try? result.get().int64(0, 0)) ?? -1)
            }
        }
        #expect(loop.run(until: { answers.count == 100 }, timeoutSeconds: 15))
        #expect(answers == (1...100).map { Int64($0) })
        #expect(connection.preparedCount == 1)
        let statements = try connection.run(loop, "SELECT count(*)::int8 FROM pg_prepared_statements")
        #expect(try statements.int64(0, 0) == 1)

        // Other parameter types are another statement (a binary int4 is not an int8).
        let narrow = try wait(loop) {
            connection.query(PostgresStatement("SELECT $1::int8 + 1", [.int32(41)], prepared: true), completion: $0)
        }.get()
        #expect(try narrow.int64(0, 0) == 42)
        #expect(connection.preparedCount == 2)

        // Unprepared statements are not remembered.
        _ = try wait(loop) { connection.query(PostgresStatement("SELECT 1"), completion: $0) }.get()
        #expect(connection.preparedCount == 2)
    }

    @Test("a statement that does not parse fails its uses only, and is prepared again on its next use")
    func failedParse() async throws {
        let url = try await freshDatabase()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let connection = try connect(url, on: loop)
        defer { connection.close() }

        let sql = "SELECT count(*)::int8 FROM later"
        var outcomes: [Result<PostgresResult, PostgresError>] = []
        connection.query(PostgresStatement(sql, [], prepared: true)) { outcomes.append($0) }
        connection.query("SELECT 2::int8") { outcomes.append($0) }
        #expect(loop.run(until: { outcomes.count == 2 }, timeoutSeconds: 15))
        #expect(failure(outcomes[0])?.sqlState == "42P01")
        #expect(try outcomes[1].get().int64(0, 0) == 2)
        #expect(connection.preparedCount == 0)

        _ = try connection.run(loop, "CREATE TABLE later (x int8)")
        let now = try wait(loop) { connection.query(PostgresStatement(sql, [], prepared: true), completion: $0) }.get()
        #expect(try now.int64(0, 0) == 0)
        #expect(connection.preparedCount == 1)
    }

    @Test("prepared statements in a transaction: committed together, or all rolled back with the failure")
    func inTransaction() async throws {
        let url = try await freshDatabase()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let connection = try connect(url, on: loop)
        defer { connection.close() }
        _ = try connection.run(loop, "CREATE TABLE t (k int8 PRIMARY KEY)")

        let insert = "INSERT INTO t (k) VALUES ($1) RETURNING k"
        let committed = try wait(loop) {
            connection.transaction([PostgresStatement(insert, [.int64(1)], prepared: true),
                                    PostgresStatement(insert, [.int64(2)], prepared: true)], completion: $0)
        }.get()
        #expect(committed.map { $0.rows } == [[[.int64(1)]], [[.int64(2)]]])
        let failed = try wait(loop) {
            connection.transaction([PostgresStatement(insert, [.int64(3)], prepared: true),
                                    PostgresStatement(insert, [.int64(1)], prepared: true)], completion: $0)
        }
        #expect(failure(failed)?.sqlState == "23505")
        let rows = try connection.run(loop, "SELECT k FROM t ORDER BY k")
        #expect(rows.rows == [[.int64(1)], [.int64(2)]])
    }

    @Test("array parameters, NULL elements and empty arrays included, arrive as arrays, also through unnest WITH ORDINALITY")
    func arrays() async throws {
        let url = try await freshDatabase()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let connection = try connect(url, on: loop)
        defer { connection.close() }

        let texts: [String?] = ["a", nil, "", "grüße ✓"]
        let bytes: [[UInt8]?] = [[0, 1, 255], nil, [], [7]]
        let numbers: [Int64?] = [.min, nil, 0, .max]
        let small: [Int32?] = [.min, nil, -1, .max]
        let flags: [Bool?] = [true, nil, false, true]
        for prepared in [false, true] {
            let rows = try wait(loop) {
                connection.query(PostgresStatement("""
                    SELECT r.n, r.t, r.b, r.i, r.s, r.f
                    FROM unnest($1::text[], $2::bytea[], $3::int8[], $4::int4[], $5::bool[]) WITH ORDINALITY AS r (t, b, i, s, f, n)
                    ORDER BY r.n
                    """, [.textArray(texts), .bytesArray(bytes), .int64Array(numbers), .int32Array(small), .boolArray(flags)],
                    prepared: prepared), completion: $0)
            }.get()
            #expect(rows.rows.count == 4)
            for row in 0..<4 {
                #expect(rows.rows[row][0] == .int64(Int64(row + 1)))
                #expect(rows.rows[row][1] == (texts[row].map { .text($0) } ?? .null))
                #expect(rows.rows[row][2] == (bytes[row].map { .bytes($0) } ?? .null))
                #expect(rows.rows[row][3] == (numbers[row].map { .int64($0) } ?? .null))
                #expect(rows.rows[row][4] == (small[row].map { .int32($0) } ?? .null))
                #expect(rows.rows[row][5] == (flags[row].map { .bool($0) } ?? .null))
            }
        }
        let empty = try connection.run(loop, "SELECT cardinality($1::text[])::int8, cardinality($2::int8[])::int8",
                                       [.textArray([]), .int64Array([])])
        #expect(empty.rows == [[.int64(0), .int64(0)]])
    }
}
