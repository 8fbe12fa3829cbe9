import PushEventLoop
import PushPostgres
import PushTestSupport
import Testing

/// Queries against a real server over a real socket: values both ways, pipelining, and
/// failures that stay with their own request.
@Suite(.ownThread, .enabled(if: PostgresCluster.testsEnabled, "PostgreSQL is not installed"))
struct PostgresQueryTests {
    @Test("every value type round-trips as a parameter and as a column, NULL and bytea with zero bytes included")
    func valuesRoundTrip() async throws {
        let url = try await freshDatabase()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let connection = try connect(url, on: loop)
        defer { connection.close() }

        let large = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ ($0 >> 8)) }
        let values: [PostgresValue] = [
            .int64(.min), .int64(.max), .int64(0), .int32(.min), .int32(-1), .text(""), .text("grüße, 世界 ✓"),
            .bytes([]), .bytes([0, 0, 1, 0, 255]), .bytes(large), .bool(true), .bool(false),
        ]
        for value in values {
            let result = try connection.run(loop, "SELECT $1", [value])
            #expect(result.rows == [[value]], "\(value.kindForTest)")
        }
        // NULL takes its type from where it is used.
        let null = try connection.run(loop, "SELECT $1::int8, $2::text", [.null, .null])
        #expect(null.rows == [[.null, .null]])

        _ = try connection.run(loop, """
            CREATE TABLE everything (a int8, b int4, c int2, d text, e varchar(20), f char(3), g bytea, h bool, i name)
            """)
        let insert = try connection.run(loop, "INSERT INTO everything VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)", [
            .int64(1 << 40), .int32(-7), .int32(12), .text("t"), .text("v"), .text("ab"), .bytes([0]), .bool(true), .text("n"),
        ])
        #expect(insert.affectedRows == 1)
        _ = try connection.run(loop, "INSERT INTO everything VALUES (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)")
        let rows = try connection.run(loop, "SELECT * FROM everything ORDER BY a NULLS LAST")
        #expect(rows.columns == ["a", "b", "c", "d", "e", "f", "g", "h", "i"])
        #expect(rows.rows[0] == [.int64(1 << 40), .int32(-7), .int32(12), .text("t"), .text("v"), .text("ab "), .bytes([0]), .bool(true), .text("n")])
        #expect(rows.rows[1] == Array(repeating: .null, count: 9))
        #expect(rows.affectedRows == 2)
        #expect(try rows.int64(0, 2) == 12)
    }

    @Test("1,000 queries sent from one loop turn are answered in order, down one pipeline")
    func pipelinesInOrder() async throws {
        let url = try await freshDatabase()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let connection = try connect(url, on: loop)
        defer { connection.close() }

        let count = 1_000
        var answers: [Int64] = []
        var failures = 0
        let start = ContinuousClock.now
        for index in 0..<count {
            connection.query("SELECT $1::int8 * 2", [.int64(Int64(index))]) { result in
                switch result {
                case .success(let rows): answers.append((try? rows.int64(0, 0)) ?? -1)
                case .failure: failures += 1
                }
            }
        }
        // All sent before the loop ran once, and nothing completed inside query().
        #expect(connection.pendingCount == count)
        #expect(answers.isEmpty)
        #expect(loop.run(until: { answers.count + failures == count }, timeoutSeconds: 30))
        let elapsed = ContinuousClock.now - start
        #expect(failures == 0)
        #expect(answers == (0..<count).map { Int64($0 * 2) })
        #expect(connection.pendingCount == 0)
        print("1000 pipelined queries answered in \(elapsed)")
    }

    @Test("a syntax error, a unique violation or an unreadable column fails only its own query")
    func failuresStayWithTheirQuery() async throws {
        let url = try await freshDatabase()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let connection = try connect(url, on: loop)
        defer { connection.close() }
        _ = try connection.run(loop, "CREATE TABLE names (name text PRIMARY KEY)")

        var outcomes: [Result<PostgresResult, PostgresError>] = []
        let statements: [(String, [PostgresValue])] = [
            ("INSERT INTO names VALUES ($1)", [.text("ann")]),
            ("SELEC nonsense", []),
            ("INSERT INTO names VALUES ($1)", [.text("bob")]),
            ("INSERT INTO names VALUES ($1)", [.text("ann")]),
            ("SELECT now()", []),
            ("SELECT count(*) FROM names", []),
        ]
        for (sql, parameters) in statements {
            connection.query(sql, parameters) { outcomes.append($0) }
        }
        #expect(loop.run(until: { outcomes.count == statements.count }))
        #expect((try? outcomes[0].get().affectedRows) == 1)
        let syntax = failure(outcomes[1])
        #expect(syntax?.kind == .server)
        #expect(syntax?.sqlState == "42601")
        #expect((try? outcomes[2].get().affectedRows) == 1)
        let duplicate = failure(outcomes[3])
        #expect(duplicate?.kind == .server)
        #expect(duplicate?.sqlState == "23505")
        // Row values stay out of messages (they can be secrets).
        #expect(duplicate.map { !$0.message.contains("ann") } ?? false)
        #expect(failure(outcomes[4])?.kind == .protocolViolation)
        #expect((try? outcomes[5].get().int64(0, 0)) == 2)
        #expect(connection.isOpen)
    }

    @Test("sessions run with synchronous_commit on, even when the URL asks for off")
    func durableCommits() async throws {
        let url = try await freshDatabase()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let connection = try connect(url + "?options=-c%20synchronous_commit%3Doff", on: loop)
        defer { connection.close() }
        #expect(try connection.run(loop, "SHOW synchronous_commit").text(0, 0) == "on")
    }

    @Test("completions never run inside the call, and after close() every pending request fails with .connection")
    func closeFailsPending() async throws {
        let url = try await freshDatabase()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let connection = try connect(url, on: loop)
        var closeCalls = 0
        connection.onClose = { _ in closeCalls += 1 }
        var outcomes: [Result<PostgresResult, PostgresError>] = []
        connection.query("SELECT pg_sleep(5)") { outcomes.append($0) }
        connection.query("SELECT 1") { outcomes.append($0) }
        connection.close()
        connection.query("SELECT 2") { outcomes.append($0) }
        #expect(outcomes.isEmpty)
        #expect(loop.run(until: { outcomes.count == 3 }))
        #expect(outcomes.allSatisfy { failure($0)?.kind == .connection })
        #expect(closeCalls == 0)
        #expect(!connection.isOpen)
    }

    @Test("a connection dropped with requests pending fails them on the loop; a loop shutdown fails them at once")
    func releasedAndShutDown() async throws {
        let url = try await freshDatabase()
        let loop = try EventLoop()
        var outcomes: [Result<PostgresResult, PostgresError>] = []
        var dropped: PostgresConnection? = try connect(url, on: loop)
        dropped?.query("SELECT pg_sleep(5)") { outcomes.append($0) }
        dropped = nil
        #expect(outcomes.isEmpty)
        #expect(loop.run(until: { outcomes.count == 1 }))

        let open = try connect(url, on: loop)
        open.query("SELECT pg_sleep(5)") { outcomes.append($0) }
        open.query("SELECT 1") { outcomes.append($0) }
        loop.shutdown()
        #expect(outcomes.count == 3)
        #expect(outcomes.allSatisfy { failure($0)?.kind == .connection })
        #expect(!open.isOpen)
    }
}

extension PostgresValue {
    /// A short label for failure messages (a megabyte of bytes is not one).
    var kindForTest: String {
        switch self {
        case .bytes(let bytes): "bytes(\(bytes.count))"
        default: "\(self)"
        }
    }
}
