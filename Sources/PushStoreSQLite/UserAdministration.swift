import CSQLite
import PushClock
import PushSession
import PushStoreLogic
import PushWire

/// The deployment commands' side of the users table, run in their own process next to a
/// store that may be running: every change is one transaction, and a running store sees
/// it through the users revision its triggers bump (`SQLitePayloadReader.usersRevision`).
public final class UserAdministration: UserAdministering {
    private let connection: SQLiteConnection

    public init(databasePath: String) throws(SQLiteError) {
        connection = try SQLitePayloadDatabase.open(path: databasePath)
    }

    /// The new user, or nil if the name is taken.
    public func add(_ name: String, passwordHash: String, nowMs: UInt64) throws -> UserRecord? {
        try UserTable.add(name, passwordHash: passwordHash, nowMs: nowMs, on: connection)
    }

    /// What was removed, or nil if there is no such user.
    public func remove(_ name: String, clock: () -> UInt64 = Clocks.wallMilliseconds) throws -> RemovedUser? {
        try UserTable.remove(name, clock: clock, on: connection)
    }

    /// Every user, by name.
    public func list(nowMs: UInt64) throws -> [UserSummary] {
        let statement = try connection.prepare("""
            SELECT u.name, u.created_at,
                   (SELECT count(*) FROM payloads p WHERE p.user_id = u.id AND p.life = \(PayloadLife.live.rawValue) AND p.expires_at > ?)
            FROM users u ORDER BY u.name
            """, persistent: false)
        try statement.bind([.uint(nowMs)])
        var users: [UserSummary] = []
        while try statement.step() {
            users.append(UserSummary(name: statement.text(0), createdAt: UInt64(bitPattern: statement.int(1)),
                                     livePayloads: Int(statement.int(2))))
        }
        return users
    }
}

/// The users table's changes, shared by `UserAdministration` and the writer's own
/// `addUser`/`removeUser`.
enum UserTable {
    static func add(_ name: String, passwordHash: String, nowMs: UInt64, on connection: SQLiteConnection) throws(SQLiteError) -> UserRecord? {
        try transaction(connection) { () throws(SQLiteError) -> UserRecord? in
            if try connection.integer(bound: "SELECT 1 FROM users WHERE name = ?", [.text(name)]) != nil { return nil }
            // Tokens a store issued to a removed holder of this name predate the fence.
            let fence = UInt64(bitPattern: try connection.integer("SELECT value FROM store_meta WHERE key = 'removal_fence_ms'") ?? 0)
            let createdAt = max(nowMs, fence)
            let insert = try connection.prepare("INSERT INTO users (id, name, password_hash, created_at) VALUES (?, ?, ?, ?)", persistent: false)
            // A clash of random 63-bit ids is not expected; a second draw settles one.
            for _ in 0..<4 {
                let id = try SQLiteError.reporting(UserIdentity.newID)
                if try connection.integer(bound: "SELECT 1 FROM users WHERE id = ?", [.uint(id)]) != nil { continue }
                try insert.run([.uint(id), .text(name), .text(passwordHash), .uint(createdAt)])
                return UserRecord(id: id, name: name, passwordHash: passwordHash, createdAt: createdAt)
            }
            throw SQLiteError(code: 0, message: "no free user id")
        }
    }

    /// Deletes the user, its payloads and their receipts and revokes its registrations in
    /// one transaction (deleted bytes zeroed on disk by secure_delete), then checkpoints so
    /// the freed pages reach the database file zeroed and the WAL is emptied.
    static func remove(_ name: String, clock: () -> UInt64, on connection: SQLiteConnection) throws(SQLiteError) -> RemovedUser? {
        let removed = try transaction(connection) { () throws(SQLiteError) -> RemovedUser? in
            guard let raw = try connection.integer(bound: "SELECT id FROM users WHERE name = ?", [.text(name)]) else { return nil }
            let id = UInt64(bitPattern: raw)
            let user: [SQLiteStatement.Value] = [.uint(id)]
            try connection.run("DELETE FROM receipts WHERE seq IN (SELECT seq FROM payloads WHERE user_id = ?)", user)
            try connection.run("DELETE FROM audiences WHERE seq IN (SELECT seq FROM payloads WHERE user_id = ?)", user)
            try connection.run("DELETE FROM payloads WHERE user_id = ?", user)
            let payloads = connection.changes
            try connection.run("DELETE FROM users WHERE id = ?", user)
            // Its devices go with it, in the same transaction: a running store refuses
            // their tokens and gateways drop them as soon as they see the change.
            let registrations = try RegistryTable.revokeAll(userID: id, nowMs: clock(), on: connection)
            // Read last, just before the commit, so the fence is past the commit too.
            // The transaction holds the write lock: the fence read is the fence replaced.
            let held = UInt64(bitPattern: try connection.integer("SELECT value FROM store_meta WHERE key = 'removal_fence_ms'") ?? 0)
            try connection.run("UPDATE store_meta SET value = ? WHERE key = 'removal_fence_ms'",
                               [.uint(UserRemoval.fence(afterRemovalAt: clock(), held: held))])
            return RemovedUser(name: name, id: id, payloads: payloads, registrations: registrations)
        }
        if removed != nil {
            // Best effort: a reader of a running store can hold the checkpoint back; what
            // stays in the WAL is sealed, and the store's own checkpoints copy it later.
            try? connection.execute("PRAGMA incremental_vacuum")
            try? connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        }
        return removed
    }

    static func transaction<T>(_ connection: SQLiteConnection, _ body: () throws(SQLiteError) -> T) throws(SQLiteError) -> T {
        try transaction(connection, body, failure: { $0 })
    }

    /// `body` in one write transaction (`BEGIN IMMEDIATE` takes the write lock before
    /// anything is read); the database's own failures become `failure`'s.
    static func transaction<T, Failure: Error>(_ connection: SQLiteConnection, _ body: () throws(Failure) -> T,
                                               failure: (SQLiteError) -> Failure) throws(Failure) -> T {
        do {
            try connection.execute("BEGIN IMMEDIATE")
        } catch {
            throw failure(error)
        }
        do throws(Failure) {
            let result = try body()
            do {
                try connection.execute("COMMIT")
            } catch {
                throw failure(error)
            }
            return result
        } catch {
            try? connection.execute("ROLLBACK")
            throw error
        }
    }
}

extension SQLiteConnection {
    /// The first column of the first row of `sql` with `values` bound, or nil without a row.
    func integer(bound sql: String, _ values: [SQLiteStatement.Value]) throws(SQLiteError) -> Int64? {
        let statement = try prepare(sql, persistent: false)
        try statement.bind(values)
        defer { statement.reset() }
        return try statement.step() ? statement.int(0) : nil
    }

    /// Runs `sql` once with `values` bound.
    func run(_ sql: String, _ values: [SQLiteStatement.Value]) throws(SQLiteError) {
        try prepare(sql, persistent: false).run(values)
    }
}
