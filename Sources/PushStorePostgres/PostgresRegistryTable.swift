import PushPostgres
import PushSecurity
import PushStoreLogic
import PushWire

/// The registry's changes on PostgreSQL, as `RegistryTable` makes them on SQLite: each
/// change takes the next number of the counter in `store_meta` ([4.16-5]). Taking that
/// number locks the counter's row until the transaction ends, so registry changes, from
/// any process, commit one at a time in the order of their numbers; callers lock it
/// first (`lockChanges`) so that what they read before changing is current too.
enum PostgresRegistryTable {
    static let columns = RegistryRow.columns

    /// Locks the change counter for the rest of the transaction: the registry cannot
    /// change under the caller.
    static func lockChanges(on connection: PostgresBlockingConnection) throws(PostgresError) {
        _ = try connection.query("SELECT value FROM store_meta WHERE key = 'registry_seq' FOR UPDATE")
    }

    /// The next change number; inside the transaction that makes the change.
    static func nextChange(on connection: PostgresBlockingConnection) throws(PostgresError) -> UInt64 {
        let result = try connection.query("UPDATE store_meta SET value = value + 1 WHERE key = 'registry_seq' RETURNING value")
        guard !result.rows.isEmpty else { throw PostgresError(kind: .protocolViolation, message: "the registry's change counter is missing") }
        return try result.uint(0, 0)
    }

    static func lastChange(on connection: PostgresBlockingConnection) throws(PostgresError) -> UInt64 {
        let result = try connection.query("SELECT value FROM store_meta WHERE key = 'registry_seq'")
        return result.rows.isEmpty ? 0 : try result.uint(0, 0)
    }

    /// A row selected with `columns`, in that order.
    static func record(_ result: PostgresResult, row: Int) throws(PostgresError) -> RegistrationRecord {
        let tags = try result.text(row, 3)
        return RegistrationRecord(
            deviceID: try result.text(row, 0), user: try result.text(row, 1), userID: try result.uint(row, 2),
            tags: tags.isEmpty ? [] : tags.split(separator: "\n", omittingEmptySubsequences: false).map(String.init),
            issuedAt: try result.uint(row, 4), expiresAt: try result.uint(row, 5),
            state: RegistryEntry.State(rawValue: UInt8(truncatingIfNeeded: try result.int64(row, 6))) ?? .revoked,
            changeSequence: try result.uint(row, 7),
            revokedAt: try result.optionalInt(row, 8).map { UInt64(max(0, $0)) },
            credential: try result.bytes(row, 9))
    }

    static func enrolled(_ deviceID: String, on connection: PostgresBlockingConnection) throws(PostgresError) -> RegistrationRecord? {
        let result = try connection.query("SELECT \(columns) FROM registrations WHERE device_id = $1 AND state = \(RegistryEntry.State.enrolled.sql)",
                                          [.text(deviceID)])
        return result.rows.isEmpty ? nil : try record(result, row: 0)
    }

    /// Revokes the enrolled registration of `deviceID`, deleting its device key in the same
    /// commit ([4.16-6]); what it was, or nil if none was.
    static func revoke(_ deviceID: String, nowMs: UInt64, on connection: PostgresBlockingConnection) throws(PostgresError) -> RegistrationRecord? {
        guard var current = try enrolled(deviceID, on: connection) else { return nil }
        let change = try nextChange(on: connection)
        _ = try connection.query("""
            UPDATE registrations SET state = \(RegistryEntry.State.revoked.sql), change_seq = $1, revoked_at = $2,
                                     key_suite = NULL, device_key = NULL, key_id = NULL
            WHERE device_id = $3 AND state = \(RegistryEntry.State.enrolled.sql)
            """, [.uint(change), .uint(nowMs), .text(deviceID)])
        current.state = .revoked
        current.changeSequence = change
        current.revokedAt = nowMs
        return current
    }

    /// Revokes every enrolled registration of the user, each a change of its own so that
    /// gateways learn of each; how many there were. The caller holds `lockChanges`.
    static func revokeAll(userID: UInt64, nowMs: UInt64, on connection: PostgresBlockingConnection) throws(PostgresError) -> Int {
        let devices = try connection.query("SELECT device_id FROM registrations WHERE user_id = $1 AND state = \(RegistryEntry.State.enrolled.sql) ORDER BY id",
                                           [.uint(userID)])
        for row in devices.rows.indices { _ = try revoke(try devices.text(row, 0), nowMs: nowMs, on: connection) }
        return devices.rows.count
    }

    /// Records a new enrolment; the caller revoked the previous one first, so that change
    /// is numbered before this one ([4.16-6]).
    static func insert(_ registration: Registration, userID: UInt64, credential: [UInt8],
                       on connection: PostgresBlockingConnection) throws(PostgresError) -> RegistrationRecord {
        let change = try nextChange(on: connection)
        _ = try connection.query("""
            INSERT INTO registrations (change_seq, state, device_id, user_id, user_name, tags, issued_at, expires_at, credential)
            VALUES ($1, \(RegistryEntry.State.enrolled.sql), $2, $3, $4, $5, $6, $7, $8)
            """, [.uint(change), .text(registration.deviceID), .uint(userID), .text(registration.user),
                  .text(registration.tags.joined(separator: "\n")), .uint(registration.issuedAt), .uint(registration.expiresAt),
                  .bytes(credential)])
        return RegistrationRecord(deviceID: registration.deviceID, user: registration.user, userID: userID, tags: registration.tags,
                                  issuedAt: registration.issuedAt, expiresAt: registration.expiresAt, state: .enrolled,
                                  changeSequence: change, revokedAt: nil, credential: credential)
    }

    /// The latest issue time of any registration of `deviceID` kept (`RegistrationMinting.issueTime`).
    static func latestIssue(of deviceID: String, on connection: PostgresBlockingConnection) throws(PostgresError) -> UInt64? {
        let result = try connection.query("SELECT max(issued_at) FROM registrations WHERE device_id = $1", [.text(deviceID)])
        return try result.optionalInt(0, 0).map { UInt64(max(0, $0)) }
    }
}
