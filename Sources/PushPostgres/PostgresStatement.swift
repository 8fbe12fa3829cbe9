/// One statement of a `PostgresConnection.transaction`, or of `query`.
public struct PostgresStatement: Sendable {
    public var sql: String
    public var parameters: [PostgresValue]
    /// Run as a protocol-level prepared statement, parsed and planned by the server once
    /// per connection (and per parameter types) instead of every time. For statements of
    /// a fixed shape that run often; a shape that varies (a VALUES list of any length)
    /// would fill the server's memory with statements used once.
    public var prepared: Bool

    public init(_ sql: String, _ parameters: [PostgresValue] = [], prepared: Bool = false) {
        self.sql = sql
        self.parameters = parameters
        self.prepared = prepared
    }
}
