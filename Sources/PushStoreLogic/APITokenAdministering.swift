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

/// The tokens' change cursor, kept alike by both backends.
package enum APITokenRevision {
    /// The `store_meta` key of the tokens' change cursor. Its row is made by the first
    /// change (a database from before it reads as 0), so it needs no migration.
    package static let key = "api_tokens_revision"

    /// Advances the change cursor, in the transaction of the change (SQLite and PostgreSQL
    /// alike).
    package static let advance = """
        INSERT INTO store_meta (key, value) VALUES ('\(key)', 1)
        ON CONFLICT (key) DO UPDATE SET value = store_meta.value + 1
        """
}
