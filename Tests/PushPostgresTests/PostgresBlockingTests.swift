import PushPostgres
import PushTestSupport
import Testing

/// The blocking connection the CLI commands use.
@Suite(.ownThread, .enabled(if: PostgresCluster.testsEnabled, "PostgreSQL is not installed"))
struct PostgresBlockingTests {
    @Test("execute runs a script of several statements; query binds parameters and reads rows")
    func scriptAndQuery() async throws {
        let url = try await freshDatabase()
        try await onOwnThread {
            let connection = try PostgresBlockingConnection(url)
            try connection.execute("""
                CREATE TABLE users (name text PRIMARY KEY, secret bytea NOT NULL, created int8 NOT NULL);
                CREATE INDEX users_created ON users (created);
                """)
            let inserted = try connection.query("INSERT INTO users VALUES ($1, $2, $3)", [.text("ann"), .bytes([0, 1]), .int64(99)])
            #expect(inserted.affectedRows == 1)
            let row = try connection.query("SELECT name, secret, created FROM users WHERE name = $1", [.text("ann")])
            #expect(row.rows == [[.text("ann"), .bytes([0, 1]), .int64(99)]])
            #expect(try connection.query("SELECT 1 WHERE false").rows.isEmpty)
        }
    }

    @Test("a failing statement is a .server error with its SQLSTATE; a failing script keeps none of it")
    func failures() async throws {
        let url = try await freshDatabase()
        try await onOwnThread {
            let connection = try PostgresBlockingConnection(url)
            try connection.execute("CREATE TABLE t (id int8 PRIMARY KEY)")
            do throws(PostgresError) {
                _ = try connection.query("INSERT INTO t VALUES ($1), ($1)", [.int64(1)])
                Issue.record("duplicate accepted")
            } catch {
                #expect(error.kind == .server)
                #expect(error.sqlState == "23505")
            }
            do throws(PostgresError) {
                try connection.execute("INSERT INTO t VALUES (7); SELEC 1;")
                Issue.record("syntax error accepted")
            } catch {
                #expect(error.sqlState == "42601")
            }
            #expect(try connection.query("SELECT count(*) FROM t").int64(0, 0) == 0)
            connection.close()
            #expect(throws: PostgresError.self) { try connection.query("SELECT 1") }
        }
    }

    @Test("connecting to a server that is not there is a .connection error")
    func nothingThere() async throws {
        let error = try await onOwnThread { () -> PostgresError? in
            do throws(PostgresError) {
                _ = try PostgresBlockingConnection("postgresql://postgres@127.0.0.1:1/x")
                return nil
            } catch {
                return error
            }
        }
        #expect(error?.kind == .connection)
    }
}
