import CSQLite
import PushStoreLogic
import PushWire

/// The registry reads of a running store, on its reader's connection: a device's enrolled
/// registration (LOGIN, tokens) and the changes after a cursor (REGISTRY). Each is one
/// lookup in an index (`registrations_enrolled`, the unique `change_seq`), so the loop
/// never waits long for one.
final class RegistryReads {
    private let enrolledByDevice: SQLiteStatement
    private let changesAfter: SQLiteStatement
    private let countsAfter: SQLiteStatement
    private let keysOfUser: SQLiteStatement
    private let keyCursor: SQLiteStatement

    init(_ connection: SQLiteConnection) throws(SQLiteError) {
        enrolledByDevice = try connection.prepare(
            "SELECT user_id, issued_at, expires_at, key_id FROM registrations WHERE device_id = ? AND state = \(RegistryEntry.State.enrolled.sql)")
        changesAfter = try connection.prepare("SELECT change_seq, state, credential FROM registrations WHERE change_seq > ? ORDER BY change_seq LIMIT ?")
        countsAfter = try connection.prepare("SELECT state, count(*) FROM registrations WHERE change_seq > ? GROUP BY state")
        keysOfUser = try connection.prepare("""
            SELECT device_id, key_suite, device_key, key_id, expires_at FROM registrations
            WHERE user_id = ? AND state = \(RegistryEntry.State.enrolled.sql) AND key_suite IS NOT NULL
            """)
        keyCursor = try connection.prepare("SELECT coalesce(max(change_seq), 0) FROM registrations WHERE user_id = ?")
    }

    func enrolledDevice(_ deviceID: String) throws(SQLiteError) -> EnrolledDevice? {
        try enrolledByDevice.bind([.text(deviceID)])
        defer { enrolledByDevice.reset() }
        guard try enrolledByDevice.step() else { return nil }
        return EnrolledDevice(userID: UInt64(bitPattern: enrolledByDevice.int(0)), issuedAt: UInt64(bitPattern: enrolledByDevice.int(1)),
                              expiresAt: UInt64(bitPattern: enrolledByDevice.int(2)),
                              keyID: enrolledByDevice.isNull(3) ? nil : DeviceKeyColumns.keyID(enrolledByDevice.int(3)))
    }

    /// At most `limit` entries after `cursor`, fewer when more would take a reply past
    /// `maxBytes` (the connection's frame size), but always one when one follows ([4.16-4]).
    /// The keys of the user's enrolled registrations that have one, and the user's key cursor
    /// ([4.18-1], [4.18-3]): which are listed, and in what order, the logic decides.
    func keys(userID: UInt64) throws(SQLiteError) -> UserKeys {
        try keysOfUser.bind([.uint(userID)])
        var keys: [RegisteredKey] = []
        while try keysOfUser.step() {
            guard let key = DeviceKeyColumns.key(suite: keysOfUser.int(1), bytes: keysOfUser.blob(2)) else { continue }
            keys.append(RegisteredKey(deviceID: keysOfUser.text(0), key: key, keyID: DeviceKeyColumns.keyID(keysOfUser.int(3)),
                                      expiresAt: UInt64(bitPattern: keysOfUser.int(4))))
        }
        keysOfUser.reset()
        try keyCursor.bind([.uint(userID)])
        defer { keyCursor.reset() }
        let cursor = try keyCursor.step() ? UInt64(bitPattern: keyCursor.int(0)) : 0
        return UserKeys(keys: keys, cursor: cursor)
    }

    func changes(after cursor: UInt64, limit: Int, maxBytes: Int) throws(SQLiteError) -> RegistryPage {
        // One row more than asked tells whether another page follows. SQLite integers are
        // signed: a cursor past Int64.max is past every change, not before them.
        try changesAfter.bind([.int(Int64(clamping: cursor)), .int(Int64(limit) + 1)])
        defer { changesAfter.reset() }
        var entries: [RegistryEntry] = []
        var next = cursor
        var bytes = RegistryPage.replyOverheadBytes
        var hasMore = false
        while try changesAfter.step() {
            let credential = changesAfter.blob(2)
            let entry = RegistryEntry(state: RegistryEntry.State(rawValue: UInt8(truncatingIfNeeded: changesAfter.int(1))) ?? .revoked,
                                      credential: credential)
            if entries.count == limit || (!entries.isEmpty && bytes + entry.encodedCount > maxBytes) {
                hasMore = true
                break
            }
            bytes += entry.encodedCount
            entries.append(entry)
            next = UInt64(bitPattern: changesAfter.int(0))
        }
        return RegistryPage(entries: entries, cursor: next, hasMore: hasMore)
    }

    func counts(after cursor: UInt64) throws(SQLiteError) -> RegistryChangeCounts {
        try countsAfter.bind([.int(Int64(clamping: cursor))])
        defer { countsAfter.reset() }
        var counts = RegistryChangeCounts()
        while try countsAfter.step() {
            if countsAfter.int(0) == Int64(RegistryEntry.State.enrolled.rawValue) {
                counts.enrolled += Int(countsAfter.int(1))
            } else {
                counts.revoked += Int(countsAfter.int(1))
            }
        }
        return counts
    }
}
