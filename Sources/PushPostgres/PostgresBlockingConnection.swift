import CPostgres

/// A plain blocking libpq connection, for short-lived CLI commands (init, user, device)
/// where a loop would be ceremony. Same session settings as `PostgresConnection`
/// (`synchronous_commit=on`, UTF-8, a bounded connect). One thread at a time.
public final class PostgresBlockingConnection {
    private var conn: OpaquePointer?

    public init(_ conninfo: String) throws(PostgresError) {
        let parameters = try PostgresURL.sessionParameters(conninfo)
        guard let conn = withConnectionArrays(parameters, { keys, values in PQconnectdbParams(keys, values, 0) }) else {
            throw .connection("libpq could not allocate a connection")
        }
        PQsetNoticeProcessor(conn, sp_pq_ignore_notice, nil)
        guard PQstatus(conn) == CONNECTION_OK else {
            let message = PostgresConnectHint.explained(Self.errorMessage(conn))
            PQfinish(conn)
            throw .connection(message)
        }
        self.conn = conn
    }

    deinit { close() }

    /// Idempotent; later calls fail with `.connection`.
    public func close() {
        if let conn { PQfinish(conn) }
        conn = nil
    }

    /// One statement with `$n` parameters (sent in binary, rows read in binary); it runs
    /// in its own transaction unless the session opened one.
    public func query(_ sql: String, _ parameters: [PostgresValue] = []) throws(PostgresError) -> PostgresResult {
        guard let conn else { throw .connection("the connection is closed") }
        try PostgresParameters.check(sql, parameters)
        let encoded = PostgresParameters(parameters)
        let result = encoded.withArrays { types, values, lengths, formats in
            PQexecParams(conn, sql, encoded.count, types, values, lengths, formats, 1)
        }
        return try finish(conn, result)
    }

    /// A script of several statements separated by semicolons, by the simple query
    /// protocol: without BEGIN/COMMIT in it, all of it is one transaction. Stops at the
    /// first error (earlier statements then roll back too).
    public func execute(_ script: String) throws(PostgresError) {
        guard let conn else { throw .connection("the connection is closed") }
        if script.utf8.contains(0) { throw .violation("the SQL text contains a NUL byte") }
        // Text-format rows are fine here: they are not read.
        guard let result = PQexec(conn, script) else { throw .connection(Self.errorMessage(conn)) }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            return
        case PGRES_FATAL_ERROR where PQstatus(conn) == CONNECTION_BAD:
            throw .connection(Self.errorMessage(conn))
        case PGRES_FATAL_ERROR, PGRES_NONFATAL_ERROR:
            throw PostgresResultDecoding.serverError(result)
        default:
            throw .violation("unexpected result status \(String(cString: PQresStatus(PQresultStatus(result))))")
        }
    }

    private func finish(_ conn: OpaquePointer, _ result: OpaquePointer?) throws(PostgresError) -> PostgresResult {
        guard let result else { throw .connection(Self.errorMessage(conn)) }
        defer { PQclear(result) }
        switch PostgresResultDecoding.outcome(of: result) {
        case .result(let decoded):
            return decoded
        case .failure(let error):
            if PQstatus(conn) == CONNECTION_BAD { throw .connection(Self.errorMessage(conn)) }
            throw error
        case .aborted, .sync:
            throw .violation("a pipeline result outside pipeline mode")
        }
    }

    private static func errorMessage(_ conn: OpaquePointer) -> String {
        guard let text = PQerrorMessage(conn) else { return "connection failed" }
        let message = PostgresURL.trimmed(String(cString: text))
        return message.isEmpty ? "connection failed" : message.split(separator: "\n").joined(separator: "; ")
    }
}
