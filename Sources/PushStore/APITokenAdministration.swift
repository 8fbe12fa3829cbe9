import CSQLite

/// What `revoke` did: revoked the token now, or found it revoked already (nothing changed).
public enum APITokenRevocation: Sendable, Equatable {
    case revoked(APITokenRecord)
    case alreadyRevoked(APITokenRecord)

    /// The token as it is now (with its `revokedAt`).
    public var record: APITokenRecord {
        switch self {
        case .revoked(let record), .alreadyRevoked(let record): record
        }
    }
}

/// The deployment commands' side of the provider API tokens (`securepush provider token`),
/// whichever database the store keeps them in. Each change is one transaction that also
/// advances the tokens' change cursor (`api_tokens_revision` in `store_meta`); a running
/// store caches the tokens it accepted but asks the cursor with every request, so every
/// store of the database sees a revocation on its next one.
public protocol APITokenAdministering: AnyObject {
    /// Mints and stores a token for `provider` that may do `scopes`: the text (to show once)
    /// and the record.
    func create(provider: String, scopes: APITokenScopes, nowMs: UInt64) throws(APITokenError) -> (text: String, record: APITokenRecord)
    /// Every token kept, revoked ones included, oldest first; `secretHash` is left empty.
    func list() throws(APITokenError) -> [APITokenRecord]
    /// Revokes the token `id` (its row stays, for `list`); `.unknownID` if there is none.
    func revoke(id: String, nowMs: UInt64) throws(APITokenError) -> APITokenRevocation
}

extension APITokenAdministering {
    /// A token that may do everything.
    public func create(provider: String, nowMs: UInt64) throws(APITokenError) -> (text: String, record: APITokenRecord) {
        try create(provider: provider, scopes: .all, nowMs: nowMs)
    }
}

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
                    try connection.run(APITokenTable.advanceRevision, [])
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
                try connection.run(APITokenTable.advanceRevision, [])
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

    /// The `store_meta` key of the tokens' change cursor. Its row is made by the first
    /// change (a database from before it reads as 0), so it needs no migration.
    static let revisionKey = "api_tokens_revision"

    /// Advances the change cursor, in the transaction of the change (SQLite and PostgreSQL
    /// alike).
    static let advanceRevision = """
        INSERT INTO store_meta (key, value) VALUES ('\(revisionKey)', 1)
        ON CONFLICT (key) DO UPDATE SET value = store_meta.value + 1
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
