import PushPostgres

/// The reads, and the writes of a fixed shape, as prepared statements: the server parses
/// and plans each shape once per connection instead of once per request, which is most of
/// a read's cost there (measured: a FETCH's read at 5,500/s planned each time, 18,900/s
/// prepared, on this 2-core machine).
///
/// SQL-level PREPARE and EXECUTE, because `PostgresConnection` sends every statement
/// unnamed. EXECUTE cannot take `$n` parameters, so its arguments are written into its
/// text, every one as digits or as hexadecimal decoded by the server (`decode('…', 'hex')`):
/// no character of a value ever reaches the SQL text, whatever it holds and whatever the
/// server's string settings. When the driver offers protocol-level prepared statements,
/// only this file changes.
///
/// A statement is prepared on a connection the first time it is used there, in the same
/// pipeline just before its first EXECUTE, so preparing costs no round trip. Loop-confined.
final class PostgresPreparedStatements {
    /// Names by SQL text, shared by every connection.
    private var names: [String: String] = [:]

    /// Runs `sql` with `parameters` on `link`'s connection as a prepared statement.
    func query(_ sql: String, _ parameters: [PostgresValue], on connection: PostgresConnection, of link: PostgresLink,
               completion: @escaping (Result<PostgresResult, PostgresError>) -> Void) {
        let execute = statement(sql, parameters, on: connection, of: link)
        connection.query(execute.sql, [], completion: completion)
    }

    /// The EXECUTE of `sql` with `parameters`, for a query or a transaction on `link`'s
    /// connection, preparing it there first (pipelined ahead) if it is not yet.
    func statement(_ sql: String, _ parameters: [PostgresValue], on connection: PostgresConnection, of link: PostgresLink) -> PostgresStatement {
        let name = self.name(for: sql)
        if !link.prepared.contains(name) {
            link.prepared.insert(name)
            let types = parameters.map(PostgresPreparedStatements.typeName).joined(separator: ", ")
            connection.query("PREPARE \(name) (\(types)) AS \(sql)") { [weak link] result in
                // The EXECUTEs already sent fail with it; later ones prepare it again.
                if case .failure = result, let link, link.connection === connection { link.prepared.remove(name) }
            }
        }
        let arguments = parameters.map(PostgresPreparedStatements.literal).joined(separator: ", ")
        return PostgresStatement(parameters.isEmpty ? "EXECUTE \(name)" : "EXECUTE \(name) (\(arguments))")
    }

    private func name(for sql: String) -> String {
        if let known = names[sql] { return known }
        let name = "securepush_\(names.count + 1)"
        names[sql] = name
        return name
    }

    static func typeName(_ value: PostgresValue) -> String {
        switch value {
        case .null, .text: "text"
        case .int64: "bigint"
        case .int32: "integer"
        case .bytes: "bytea"
        case .bool: "boolean"
        }
    }

    /// A value as SQL text made only of digits, hexadecimal and fixed words.
    static func literal(_ value: PostgresValue) -> String {
        switch value {
        case .null: "NULL"
        case .int64(let number): String(number)
        case .int32(let number): String(number)
        case .bool(let flag): flag ? "true" : "false"
        case .bytes(let bytes): "decode('\(hex(bytes))', 'hex')"
        case .text(let text): "convert_from(decode('\(hex(Array(text.utf8)))', 'hex'), 'UTF8')"
        }
    }

    private static let digits = Array("0123456789abcdef".utf8)

    static func hex(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
