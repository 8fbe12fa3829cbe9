import PushPostgres
import PushStoreLogic

/// The API tokens in a PostgreSQL store database, on the administration's connection
/// (`PostgresAdministration.apiTokens`).
final class PostgresAPITokens: APITokenAdministering {
    private let connection: PostgresBlockingConnection

    init(connection: PostgresBlockingConnection) {
        self.connection = connection
    }

    func create(provider: String, scopes: APITokenScopes, nowMs: UInt64) throws(APITokenError) -> (text: String, record: APITokenRecord) {
        // A clash of random 48-bit ids is not expected; another draw settles one.
        for _ in 0..<4 {
            let token = try APIToken.mint(provider: provider, scopes: scopes, nowMs: nowMs)
            let record = token.record
            let inserted: Bool
            do {
                inserted = try connection.transaction { () throws -> Bool in
                    let result = try connection.query("""
                        INSERT INTO api_tokens (id, provider, secret_hash, created_at, scopes) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING
                        """, [.text(record.id), .text(record.provider), .bytes(record.secretHash), .uint(record.createdAt),
                              .text(record.scopes.description)])
                    guard result.affectedRows == 1 else { return false }
                    // Every store caching tokens sees the change on its next request.
                    _ = try connection.query(APITokenRevision.advance)
                    return true
                }
            } catch {
                throw .storage("\(error)")
            }
            if inserted { return token }
        }
        throw .storage("no free API token id")
    }

    func list() throws(APITokenError) -> [APITokenRecord] {
        try storage { () throws(PostgresError) -> [APITokenRecord] in
            let result = try connection.query("SELECT id, provider, created_at, revoked_at, scopes FROM api_tokens ORDER BY created_at, id")
            return try result.rows.indices.map { (row) throws(PostgresError) in
                APITokenRecord(id: try result.text(row, 0), provider: try result.text(row, 1), secretHash: [],
                               createdAt: try result.uint(row, 2), revokedAt: result.isNull(row, 3) ? nil : try result.uint(row, 3),
                               scopes: APITokenScopes(names: try result.text(row, 4)) ?? [])
            }
        }
    }

    func revoke(id: String, nowMs: UInt64) throws(APITokenError) -> APITokenRevocation {
        guard APIToken.isValidID(id) else { throw .unknownID(id) }
        do {
            return try connection.transaction { () throws -> APITokenRevocation in
                let found = try connection.query("""
                    SELECT provider, secret_hash, created_at, revoked_at, scopes FROM api_tokens WHERE id = $1 FOR UPDATE
                    """, [.text(id)])
                guard !found.rows.isEmpty else { throw APITokenError.unknownID(id) }
                var record = APITokenRecord(id: id, provider: try found.text(0, 0), secretHash: try found.bytes(0, 1),
                                            createdAt: try found.uint(0, 2), revokedAt: found.isNull(0, 3) ? nil : try found.uint(0, 3),
                                            scopes: APITokenScopes(names: try found.text(0, 4)) ?? [])
                if record.revokedAt != nil { return .alreadyRevoked(record) }
                _ = try connection.query("UPDATE api_tokens SET revoked_at = $1 WHERE id = $2", [.uint(nowMs), .text(id)])
                _ = try connection.query(APITokenRevision.advance)
                record.revokedAt = nowMs
                return .revoked(record)
            }
        } catch let error as APITokenError {
            throw error
        } catch {
            throw .storage("\(error)")
        }
    }

    private func storage<T>(_ body: () throws(PostgresError) -> T) throws(APITokenError) -> T {
        do {
            return try body()
        } catch {
            throw .storage("\(error)")
        }
    }
}
