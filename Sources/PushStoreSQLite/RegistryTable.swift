import CSQLite
import PushSecurity
import PushStoreLogic
import PushWire

/// The registry's table and the changes made to it, shared by `RegistryAdministration`
/// (the device commands), `UserTable.remove` (a removal revokes) and the writer's sweep.
///
/// Every change takes the next number of one counter kept in `store_meta`, never reused
/// even when rows are pruned, and a running store watches that counter: it is the
/// registry's revision as well as the REGISTRY cursor ([4.16-5]).
enum RegistryTable {
    static let schema = """
        CREATE TABLE registrations (
            id INTEGER PRIMARY KEY,
            change_seq INTEGER NOT NULL UNIQUE,
            state INTEGER NOT NULL,
            device_id TEXT NOT NULL,
            user_id INTEGER NOT NULL,
            user_name TEXT NOT NULL,
            tags TEXT NOT NULL,
            issued_at INTEGER NOT NULL,
            expires_at INTEGER NOT NULL,
            revoked_at INTEGER,
            credential BLOB NOT NULL,
            UNIQUE (device_id, issued_at)
        );
        CREATE UNIQUE INDEX registrations_enrolled ON registrations(device_id) WHERE state = \(RegistryEntry.State.enrolled.sql);
        CREATE INDEX registrations_by_user ON registrations(user_id) WHERE state = \(RegistryEntry.State.enrolled.sql);
        INSERT INTO store_meta (key, value) VALUES ('registry_seq', 0)
        """

    /// A row selected with `RegistryRow.columns`, in that order, from column `first` on.
    static func record(_ row: SQLiteStatement, from first: Int32 = 0) -> RegistrationRecord {
        RegistrationRecord(
            deviceID: row.text(first), user: row.text(first + 1), userID: UInt64(bitPattern: row.int(first + 2)),
            tags: RegistryRow.tags(row.text(first + 3)),
            issuedAt: UInt64(bitPattern: row.int(first + 4)), expiresAt: UInt64(bitPattern: row.int(first + 5)),
            state: RegistryEntry.State(rawValue: UInt8(truncatingIfNeeded: row.int(first + 6))) ?? .revoked,
            changeSequence: UInt64(bitPattern: row.int(first + 7)),
            revokedAt: row.isNull(first + 8) ? nil : UInt64(bitPattern: row.int(first + 8)),
            credential: row.blob(first + 9))
    }

    /// The next change number; call inside the transaction that makes the change.
    static func nextChange(on connection: SQLiteConnection) throws(SQLiteError) -> UInt64 {
        guard let next = try connection.integer("UPDATE store_meta SET value = value + 1 WHERE key = 'registry_seq' RETURNING value") else {
            throw SQLiteError(code: 0, message: "the registry's change counter is missing")
        }
        return UInt64(bitPattern: next)
    }

    /// The number of the last change made.
    static func lastChange(on connection: SQLiteConnection) throws(SQLiteError) -> UInt64 {
        UInt64(bitPattern: try connection.integer("SELECT value FROM store_meta WHERE key = 'registry_seq'") ?? 0)
    }

    /// The enrolled registration of `deviceID`, if there is one.
    static func enrolled(_ deviceID: String, on connection: SQLiteConnection) throws(SQLiteError) -> RegistrationRecord? {
        let row = try connection.prepare("SELECT \(RegistryRow.columns) FROM registrations WHERE device_id = ? AND state = \(RegistryEntry.State.enrolled.sql)",
                                         persistent: false)
        try row.bind([.text(deviceID)])
        defer { row.reset() }
        return try row.step() ? record(row) : nil
    }

    /// Revokes the enrolled registration of `deviceID`, deleting its device key in the same
    /// commit ([4.16-6]); what it was, or nil if none was.
    static func revoke(_ deviceID: String, nowMs: UInt64, on connection: SQLiteConnection) throws(SQLiteError) -> RegistrationRecord? {
        guard var current = try enrolled(deviceID, on: connection) else { return nil }
        let change = try nextChange(on: connection)
        try connection.run("""
            UPDATE registrations SET state = \(RegistryEntry.State.revoked.sql), change_seq = ?, revoked_at = ?,
                                     key_suite = NULL, device_key = NULL, key_id = NULL
            WHERE device_id = ? AND state = \(RegistryEntry.State.enrolled.sql)
            """, [.uint(change), .uint(nowMs), .text(deviceID)])
        current.state = .revoked
        current.changeSequence = change
        current.revokedAt = nowMs
        return current
    }

    /// Revokes every enrolled registration of the user, each as a change of its own so
    /// that gateways learn of each; how many there were.
    static func revokeAll(userID: UInt64, nowMs: UInt64, on connection: SQLiteConnection) throws(SQLiteError) -> Int {
        let select = try connection.prepare(
            "SELECT device_id FROM registrations WHERE user_id = ? AND state = \(RegistryEntry.State.enrolled.sql) ORDER BY id", persistent: false)
        try select.bind([.uint(userID)])
        var devices: [String] = []
        while try select.step() { devices.append(select.text(0)) }
        select.reset()
        for device in devices { _ = try revoke(device, nowMs: nowMs, on: connection) }
        return devices.count
    }

    /// Records a new enrolment as the device's enrolled registration; the caller revoked
    /// the previous one first, so that change is numbered before this one ([4.16-6]).
    static func insert(_ registration: Registration, userID: UInt64, credential: [UInt8],
                       on connection: SQLiteConnection) throws(SQLiteError) -> RegistrationRecord {
        let change = try nextChange(on: connection)
        try connection.run("""
            INSERT INTO registrations (change_seq, state, device_id, user_id, user_name, tags, issued_at, expires_at, credential)
            VALUES (?, \(RegistryEntry.State.enrolled.sql), ?, ?, ?, ?, ?, ?, ?)
            """, [.uint(change), .text(registration.deviceID), .uint(userID), .text(registration.user),
                  .text(registration.tags.joined(separator: "\n")), .uint(registration.issuedAt), .uint(registration.expiresAt),
                  .blob(credential)])
        return RegistrationRecord(deviceID: registration.deviceID, user: registration.user, userID: userID, tags: registration.tags,
                                  issuedAt: registration.issuedAt, expiresAt: registration.expiresAt, state: .enrolled,
                                  changeSequence: change, revokedAt: nil, credential: credential)
    }

    /// Replaces the device key of the enrolled registration (device id, issue time) with a
    /// new change number ([4.6-5], [4.16-5]); false, changing nothing, when that registration
    /// is no longer enrolled. The logic decided the key differs from the one it has.
    static func setKey(_ change: DeviceKeyChange, on connection: SQLiteConnection) throws(SQLiteError) -> Bool {
        let current = try connection.integer(bound: """
            SELECT id FROM registrations WHERE device_id = ? AND issued_at = ? AND state = \(RegistryEntry.State.enrolled.sql)
            """, [.text(change.deviceID), .uint(change.issuedAt)])
        guard let row = current else { return false }
        let sequence = try nextChange(on: connection)
        try connection.run("UPDATE registrations SET key_suite = ?, device_key = ?, key_id = ?, change_seq = ? WHERE id = ?",
                           [.int(Int64(change.key.suite.rawValue)), .blob(change.key.bytes), .int(DeviceKeyColumns.stored(change.keyID)),
                            .uint(sequence), .int(row)])
        return true
    }

    /// The latest issue time of any registration of `deviceID` kept (`RegistrationMinting.issueTime`).
    static func latestIssue(of deviceID: String, on connection: SQLiteConnection) throws(SQLiteError) -> UInt64? {
        try connection.integer(bound: "SELECT max(issued_at) FROM registrations WHERE device_id = ?", [.text(deviceID)])
            .map { UInt64(bitPattern: $0) }
    }

    /// Drops revoked registrations that have expired: a gateway refuses them by their
    /// expiry alone, so nothing is lost ([4.16-7]). Enrolled ones stay listed until
    /// revoked, so `device list` still shows what expired.
    static func pruneExpiredRevoked(nowMs: UInt64, on connection: SQLiteConnection) throws(SQLiteError) -> Int {
        try connection.run("DELETE FROM registrations WHERE state = \(RegistryEntry.State.revoked.sql) AND expires_at <= ?", [.uint(nowMs)])
        return connection.changes
    }
}
