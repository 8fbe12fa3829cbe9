/// Why a PostgreSQL operation failed.
public struct PostgresError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// No connection, or it was lost or closed: the request's outcome is unknown when
        /// it had been sent (a COMMIT may or may not have happened).
        case connection
        /// The server refused the statement (`sqlState` says why, e.g. 23505 for a unique
        /// violation); the connection is fine.
        case server
        /// The server's answer was not what this client can read (an unsupported column
        /// type, a malformed value), or the request cannot be expressed (too many parameters,
        /// a NUL byte in the SQL).
        case protocolViolation
        /// The connection string does not parse.
        case invalidURL
    }

    public var kind: Kind
    /// The five-character SQLSTATE of a server error.
    public var sqlState: String?
    public var message: String

    public init(kind: Kind, sqlState: String? = nil, message: String) {
        self.kind = kind
        self.sqlState = sqlState
        self.message = message
    }

    public var description: String {
        let prefix: String
        switch kind {
        case .connection: prefix = "PostgreSQL connection"
        case .server: prefix = "PostgreSQL"
        case .protocolViolation: prefix = "PostgreSQL protocol"
        case .invalidURL: prefix = "PostgreSQL URL"
        }
        if let sqlState { return "\(prefix): \(message) (SQLSTATE \(sqlState))" }
        return "\(prefix): \(message)"
    }

    static func connection(_ message: String) -> PostgresError { PostgresError(kind: .connection, message: message) }
    static func violation(_ message: String) -> PostgresError { PostgresError(kind: .protocolViolation, message: message) }
}
