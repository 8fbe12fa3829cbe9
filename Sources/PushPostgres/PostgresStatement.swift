/// One statement of a `PostgresConnection.transaction`.
public struct PostgresStatement: Sendable {
    public var sql: String
    public var parameters: [PostgresValue]

    public init(_ sql: String, _ parameters: [PostgresValue] = []) {
        self.sql = sql
        self.parameters = parameters
    }
}
