import CSQLite
import PushStoreLogic

/// The API tokens in a SQLite store database.
public final class APITokenAdministration: APITokenAdministering {
    private let connection: SQLiteConnection

    public init(databasePath: String) throws(SQLiteError) {
        connection = try SQLitePayloadDatabase.open(path: databasePath)
    }

    public func create(provider: String, scopes: APITokenScopes, nowMs: UInt64) throws(APITokenError) -> (text: String, record: APITokenRecord) {
        // A clash of random 48-bit ids is not expected; another draw settles one.
        for _ in 0..<4 {
            let token = try APIToken.mint(provider: provider, scopes: scopes, nowMs: nowMs)
            let record = token.record
            let inserted = try UserTable.transaction(connection, { () throws(APITokenError) -> Bool in
                try storage { () throws(SQLiteError) -> Bool in
                    try connection.run("INSERT OR IGNORE INTO api_tokens (id, provider, secret_hash, created_at, scopes) VALUES (?, ?, ?, ?, ?)",
                                       [.text(record.id), .text(record.provider), .blob(record.secretHash), .uint(record.createdAt),
                                        .text(record.scopes.description)])
                    guard connection.changes == 1 else { return false }
                    try connection.run(APITokenRevision.advance, [])
                    return true
                }
            }, failure: { APITokenError.storage("\($0)") })
            if inserted { return token }
        }
        throw .storage("no free API token id")
    }

    public func list() throws(APITokenError) -> [APITokenRecord] {
        try storage { () throws(SQLiteError) -> [APITokenRecord] in
            let statement = try connection.prepare("SELECT id, provider, created_at, revoked_at, scopes FROM api_tokens ORDER BY created_at, id",
                                                   persistent: false)
            try statement.bind([])
            var records: [APITokenRecord] = []
            while try statement.step() {
                records.append(APITokenRecord(id: statement.text(0), provider: statement.text(1), secretHash: [],
                                              createdAt: UInt64(bitPattern: statement.int(2)),
                                              revokedAt: statement.isNull(3) ? nil : UInt64(bitPattern: statement.int(3)),
                                              scopes: APITokenScopes(names: statement.text(4)) ?? []))
            }
            return records
        }
    }

    public func revoke(id: String, nowMs: UInt64) throws(APITokenError) -> APITokenRevocation {
        guard APIToken.isValidID(id) else { throw .unknownID(id) }
        return try UserTable.transaction(connection, { () throws(APITokenError) -> APITokenRevocation in
            let found = try storage { () throws(SQLiteError) in try APITokenTable.record(id, on: connection) }
            guard var record = found else { throw .unknownID(id) }
            if record.revokedAt != nil { return .alreadyRevoked(record) }
            try storage { () throws(SQLiteError) in
                try connection.run("UPDATE api_tokens SET revoked_at = ? WHERE id = ?", [.uint(nowMs), .text(id)])
                try connection.run(APITokenRevision.advance, [])
            }
            record.revokedAt = nowMs
            return .revoked(record)
        }, failure: { APITokenError.storage("\($0)") })
    }

    private func storage<T>(_ body: () throws(SQLiteError) -> T) throws(APITokenError) -> T {
        do {
            return try body()
        } catch {
            throw .storage("\(error)")
        }
    }
}

/// The `api_tokens` table of a SQLite store database.
enum APITokenTable {
    static let schema = """
        CREATE TABLE IF NOT EXISTS api_tokens (
            id TEXT PRIMARY KEY,
            provider TEXT NOT NULL,
            secret_hash BLOB NOT NULL,
            created_at INTEGER NOT NULL,
            revoked_at INTEGER,
            scopes TEXT NOT NULL DEFAULT 'send,status,recall'
        ) WITHOUT ROWID
        """

    static let selectByID = "SELECT id, provider, secret_hash, created_at, revoked_at, scopes FROM api_tokens WHERE id = ?"

    /// The row of `statement` (of `selectByID`'s columns) as a record.
    static func record(_ statement: SQLiteStatement) -> APITokenRecord {
        APITokenRecord(id: statement.text(0), provider: statement.text(1), secretHash: statement.blob(2),
                       createdAt: UInt64(bitPattern: statement.int(3)),
                       revokedAt: statement.isNull(4) ? nil : UInt64(bitPattern: statement.int(4)),
                       // A text this build cannot read grants nothing.
                       scopes: APITokenScopes(names: statement.text(5)) ?? [])
    }

    static func record(_ id: String, on connection: SQLiteConnection) throws(SQLiteError) -> APITokenRecord? {
        let statement = try connection.prepare(selectByID, persistent: false)
        try statement.bind([.text(id)])
        defer { statement.reset() }
        return try statement.step() ? record(statement) : nil
    }
}
