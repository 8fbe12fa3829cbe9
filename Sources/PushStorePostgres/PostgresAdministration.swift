import PushPostgres
import PushSecurity
import PushSession
import PushStoreLogic
import PushWire

/// Why the deployment commands could not open a PostgreSQL store database.
public enum PostgresAdministrationError: Error, CustomStringConvertible, Sendable {
    case invalidURL(PostgresError)
    case cannotConnect(database: String, PostgresError)
    case schema(database: String, PostgresSchemaError)

    public var description: String {
        switch self {
        case .invalidURL(let error): "invalid database URL: \(error.message)"
        case .cannotConnect(let database, let error): "cannot connect to \(database): \(error)"
        case .schema(let database, let error): "\(database): \(error)"
        }
    }
}

/// The deployment commands' side of users and the registry (`securepush user`, `device`)
/// on a PostgreSQL database that running stores share, over a blocking connection. Each
/// change is one transaction; the stores read the tables afresh on every request, so they
/// see it on their next one.
///
/// Locks, always taken in this order so that no two commands wait on each other in a
/// circle: the removal fence's row (adding and removing users, so a user added just after
/// a removal is dated after its fence), then the registry's change counter (removals and
/// enrolments, so a removal revokes the enrolment that committed just before it).
public final class PostgresAdministration: UserAdministering, RegistryAdministering {
    private let connection: PostgresBlockingConnection
    /// The database as the log may name it: the URL without its password.
    public let database: String

    /// Connects and brings the schema up to date, as `securepush init` and every command do.
    public init(url: String) throws(PostgresAdministrationError) {
        do {
            try PostgresURL.validate(url)
        } catch {
            throw .invalidURL(error)
        }
        database = PostgresURL.redacted(url)
        do {
            connection = try PostgresBlockingConnection(url)
        } catch {
            throw .cannotConnect(database: database, error)
        }
        do {
            try PostgresSchema.prepare(connection)
        } catch {
            throw .schema(database: database, error)
        }
    }

    // MARK: users

    public func add(_ name: String, passwordHash: String, nowMs: UInt64) throws -> UserRecord? {
        try connection.transaction { () throws -> UserRecord? in
            let fence = try connection.query("SELECT value FROM store_meta WHERE key = 'removal_fence_ms' FOR UPDATE")
            let createdAt = max(nowMs, fence.rows.isEmpty ? 0 : try fence.uint(0, 0))
            // A clash of random 63-bit ids is not expected; another draw settles one.
            for _ in 0..<4 {
                let id = try UserIdentity.newID()
                let inserted = try connection.query("""
                    INSERT INTO users (id, name, password_hash, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING
                    """, [.uint(id), .text(name), .text(passwordHash), .uint(createdAt)])
                if inserted.affectedRows == 1 { return UserRecord(id: id, name: name, passwordHash: passwordHash, createdAt: createdAt) }
                if try !connection.query("SELECT 1 FROM users WHERE name = $1", [.text(name)]).rows.isEmpty { return nil }
            }
            throw StoreBackendError("no free user id")
        }
    }

    /// Deletes the user and, through the foreign keys, its payloads and their receipts;
    /// revokes its registrations; moves the removal fence. One transaction.
    public func remove(_ name: String, clock: () -> UInt64) throws -> RemovedUser? {
        try connection.transaction { () throws -> RemovedUser? in
            // Held until the commit: the fence read is the fence replaced below.
            let fence = try connection.query("SELECT value FROM store_meta WHERE key = 'removal_fence_ms' FOR UPDATE")
            let held = fence.rows.isEmpty ? 0 : try fence.uint(0, 0)
            try PostgresRegistryTable.lockChanges(on: connection)
            let user = try connection.query("SELECT id FROM users WHERE name = $1 FOR UPDATE", [.text(name)])
            guard !user.rows.isEmpty else { return nil }
            let id = try user.uint(0, 0)
            let payloads = try connection.query("DELETE FROM payloads WHERE user_id = $1", [.uint(id)]).affectedRows
            _ = try connection.query("DELETE FROM users WHERE id = $1", [.uint(id)])
            // Its devices go with it: running stores refuse their tokens on the next
            // request, gateways drop them as soon as they see the change.
            let registrations = try PostgresRegistryTable.revokeAll(userID: id, nowMs: clock(), on: connection)
            // Read last, just before the commit, so the fence is past the commit too.
            _ = try connection.query("UPDATE store_meta SET value = $1 WHERE key = 'removal_fence_ms'",
                                     [.uint(UserRemoval.fence(afterRemovalAt: clock(), held: held))])
            return RemovedUser(name: name, id: id, payloads: payloads, registrations: registrations)
        }
    }

    public func list(nowMs: UInt64) throws -> [UserSummary] {
        let result = try connection.query("""
            SELECT u.name, u.created_at,
                   (SELECT count(*) FROM payloads p WHERE p.user_id = u.id AND p.life = \(PayloadLife.live.rawValue) AND p.expires_at > $1)
            FROM users u ORDER BY u.name
            """, [.uint(nowMs)])
        return try result.rows.indices.map { (row) throws(PostgresError) in
            UserSummary(name: try result.text(row, 0), createdAt: try result.uint(row, 1), livePayloads: Int(try result.uint(row, 2)))
        }
    }

    // MARK: the registry

    public func enrollAll(_ requests: [EnrolmentRequest], lifetimeMs: UInt64, nowMs: UInt64, signer: CredentialSigner,
                          deliver: (EnrolmentRequest, [UInt8]) throws -> Void) throws(EnrolmentError) -> [Enrolment] {
        try RegistrationMinting.enrollAll(requests, lifetimeMs: lifetimeMs, nowMs: nowMs, signer: signer, deliver: deliver,
                                          in: PostgresRegistrationLedger(connection: connection))
    }

    public func revoke(deviceIDs: [String], nowMs: UInt64) throws -> [RegistrationRecord] {
        try connection.transaction {
            try PostgresRegistryTable.lockChanges(on: connection)
            var revoked: [RegistrationRecord] = []
            for device in deviceIDs {
                if let record = try PostgresRegistryTable.revoke(device, nowMs: nowMs, on: connection) { revoked.append(record) }
            }
            return revoked
        }
    }

    public func list(user: String?) throws -> [RegistrationRecord] {
        let filter = user == nil ? "" : "WHERE user_name = $1"
        let result = try connection.query("SELECT \(PostgresRegistryTable.columns) FROM registrations \(filter) ORDER BY device_id, issued_at",
                                          user.map { [.text($0)] } ?? [])
        return try result.rows.indices.map { (row) throws(PostgresError) in try PostgresRegistryTable.record(result, row: row) }
    }

    public func enrolled(deviceID: String) throws -> RegistrationRecord? {
        try PostgresRegistryTable.enrolled(deviceID, on: connection)
    }

    public func lastChange() throws -> UInt64 {
        try PostgresRegistryTable.lastChange(on: connection)
    }

    // MARK: API tokens

    /// The provider API tokens, on this administration's connection.
    public var apiTokens: APITokenAdministering { PostgresAPITokens(connection: connection) }

    public func close() { connection.close() }
}

/// Enrolments as the PostgreSQL database records them: the registry's change counter is
/// locked first (the order of `PostgresAdministration`'s locks), and the user's row is held
/// against a removal until the commit.
private struct PostgresRegistrationLedger: RegistrationLedger {
    let connection: PostgresBlockingConnection

    func inTransaction<T>(_ body: () throws -> T) throws -> T {
        try connection.transaction {
            try PostgresRegistryTable.lockChanges(on: connection)
            return try body()
        }
    }

    func userID(named name: String) throws -> UInt64? {
        let result = try connection.query("SELECT id FROM users WHERE name = $1 FOR KEY SHARE", [.text(name)])
        return result.rows.isEmpty ? nil : try result.uint(0, 0)
    }

    func latestIssue(of deviceID: String) throws -> UInt64? { try PostgresRegistryTable.latestIssue(of: deviceID, on: connection) }

    func revoke(_ deviceID: String, nowMs: UInt64) throws -> RegistrationRecord? {
        try PostgresRegistryTable.revoke(deviceID, nowMs: nowMs, on: connection)
    }

    func insert(_ registration: Registration, userID: UInt64, credential: [UInt8]) throws -> RegistrationRecord {
        try PostgresRegistryTable.insert(registration, userID: userID, credential: credential, on: connection)
    }

    func storageFailure(_ error: any Error) -> any Error & Sendable {
        if let error = error as? PostgresError { return error }
        return StoreBackendError(error)
    }
}
