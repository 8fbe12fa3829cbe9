import CSQLite
import PushStoreLogic
import PushWire

/// The event loop's side: reads never wait for the writer (WAL readers see the last
/// committed snapshot). Bodies are opened here, with the loop's own copy of the data keys.
public final class SQLitePayloadReader: PayloadReader {
    private let connection: SQLiteConnection
    private let sealer: PayloadSealer
    private let bySequence: SQLiteStatement
    private let metadataBySequence: SQLiteStatement
    private let everyID: SQLiteStatement
    private let unreadPage: SQLiteStatement
    private let unreadOlder: SQLiteStatement
    private let audienceMember: SQLiteStatement
    private let devicesOfUser: SQLiteStatement
    private let userByName: SQLiteStatement
    private let dataVersion: SQLiteStatement
    private let revisions: SQLiteStatement
    private let registry: RegistryReads
    private let pushBySequence: SQLiteStatement
    private let waitingPage: SQLiteStatement
    private let idempotencyByKey: SQLiteStatement
    private let apiTokenByID: SQLiteStatement
    private let beginSnapshot: SQLiteStatement
    private let endSnapshot: SQLiteStatement
    private var inSnapshot = false
    /// The revisions were read inside the current snapshot, which cannot change under it.
    private var revisionsReadInSnapshot = false
    private var lastDataVersion: Int64 = -1
    private var lastUsersRevision: UInt64 = 0
    private var lastRegistrySequence: UInt64 = 0
    private var lastAPITokensRevision: UInt64 = 0

    public init(path: String) throws(SQLiteError) {
        connection = try SQLitePayloadDatabase.open(path: path)
        sealer = try PayloadSealer(databasePath: path)
        bySequence = try connection.prepare("""
            SELECT id_high, id_low, user_id, key_id, body, created_at, expires_at, read_limit, read_count, fetch_count, fetched_at, life,
                   sender, audience, sealed
            FROM payloads WHERE seq = ?
            """)
        // The same columns, the body's place taken by a NULL.
        metadataBySequence = try connection.prepare("""
            SELECT id_high, id_low, user_id, key_id, NULL, created_at, expires_at, read_limit, read_count, fetch_count, fetched_at, life,
                   sender, audience, sealed
            FROM payloads WHERE seq = ?
            """)
        everyID = try connection.prepare("SELECT id_high, id_low, seq FROM payloads")
        // The rows SYNC lists ([4.9-1], [4.9-4]), newest first below a seq: walked backwards
        // on `live_by_user`. The count of older ones walks the same rows to the end.
        let unreadRows = """
            FROM payloads
            WHERE user_id = ?1 AND seq < ?2 AND life = \(PayloadLife.live.rawValue) AND expires_at > ?3
              AND (audience = \(PayloadAudience.user.storedKind) OR EXISTS (SELECT 1 FROM audiences a WHERE a.seq = payloads.seq AND a.device = ?4))
              AND NOT EXISTS (SELECT 1 FROM receipts WHERE receipts.seq = payloads.seq AND receipts.device = ?4)
            """
        unreadPage = try connection.prepare("SELECT seq, id_high, id_low \(unreadRows) ORDER BY seq DESC LIMIT ?5")
        unreadOlder = try connection.prepare("SELECT count(*) \(unreadRows)")
        audienceMember = try connection.prepare("SELECT 1 FROM audiences WHERE seq = ? AND device = ?")
        devicesOfUser = try connection.prepare(
            "SELECT device_id, tags FROM registrations WHERE user_id = ? AND state = \(RegistryEntry.State.enrolled.sql) ORDER BY id")
        userByName = try connection.prepare("SELECT id, name, password_hash, created_at FROM users WHERE name = ?")
        dataVersion = try connection.prepare("PRAGMA data_version")
        revisions = try connection.prepare("""
            SELECT (SELECT value FROM store_meta WHERE key = 'users_revision'),
                   (SELECT value FROM store_meta WHERE key = 'registry_seq'),
                   (SELECT value FROM store_meta WHERE key = '\(APITokenRevision.key)')
            """)
        registry = try RegistryReads(connection)
        // A SEND's push and key are columns of its payload's row.
        pushBySequence = try connection.prepare("SELECT outbox, written, queued FROM payloads WHERE seq = ?")
        waitingPage = try connection.prepare("""
            SELECT seq, push, expires_at, created_at FROM payloads
            WHERE outbox = \(OutboxState.waiting.rawValue) AND seq > ? AND life = \(PayloadLife.live.rawValue) AND expires_at > ?
            ORDER BY seq LIMIT ?
            """)
        idempotencyByKey = try connection.prepare("""
            SELECT request_hash, id_high, id_low, expires_at, key_expires_at FROM payloads WHERE key_scope = ? AND idem_key = ?
            """)
        apiTokenByID = try connection.prepare(APITokenTable.selectByID)
        beginSnapshot = try connection.prepare("BEGIN")
        endSnapshot = try connection.prepare("COMMIT")
    }

    /// Outside a transaction every statement starts and ends a read transaction of its own,
    /// which in WAL mode costs about as much as the read itself (the WAL index header, a
    /// read lock on the shared memory); one explicit read transaction per request makes the
    /// `usersRevision` check before it nearly free.
    public func withSnapshot<T>(_ body: () throws -> T) throws -> T {
        if inSnapshot { return try body() }
        try beginSnapshot.runBound()
        inSnapshot = true
        revisionsReadInSnapshot = false
        defer {
            inSnapshot = false
            // Ending a read-only transaction cannot fail for want of anything to write.
            try? endSnapshot.runBound()
        }
        return try body()
    }

    public func payload(sequence: UInt64, withBody: Bool) throws -> StoredPayload? {
        let row = withBody ? bySequence : metadataBySequence
        defer { row.reset() }
        try row.set(1, sequence)
        guard try row.step() else { return nil }
        let id = PayloadID(high: UInt64(bitPattern: row.int(0)), low: UInt64(bitPattern: row.int(1)))
        let userID = UInt64(bitPattern: row.int(2))
        let body = row.isNull(4) || row.isNull(3) ? [] : try row.withBlob(4) { (sealed) throws(SQLiteError) in
            try SQLiteError.reporting { () throws(StoreBackendError) in
                try sealer.open(sealed, keyID: UInt32(truncatingIfNeeded: row.int(3)), id: id, userID: userID)
            }
        }
        return StoredPayload(
            id: id, sequence: sequence, userID: userID, body: body,
            createdAt: UInt64(bitPattern: row.int(5)), expiresAt: UInt64(bitPattern: row.int(6)),
            readLimit: UInt32(truncatingIfNeeded: row.int(7)), readCount: UInt32(truncatingIfNeeded: row.int(8)),
            fetchCount: UInt32(truncatingIfNeeded: row.int(9)), fetchedAt: UInt64(bitPattern: row.int(10)),
            life: PayloadLife(rawValue: row.int(11)) ?? .expired, sender: row.isNull(12) ? nil : row.text(12),
            listedAudience: row.int(13) != PayloadAudience.user.storedKind, sealed: row.int(14) != 0)
    }

    public func audienceLists(sequence: UInt64, deviceID: String) throws -> Bool {
        defer { audienceMember.reset() }
        try audienceMember.set(1, sequence)
        try audienceMember.set(2, deviceID)
        return try audienceMember.step()
    }

    public func enrolledDevices(userID: UInt64) throws -> [UserDevice] {
        defer { devicesOfUser.reset() }
        try devicesOfUser.set(1, userID)
        var devices: [UserDevice] = []
        while try devicesOfUser.step() {
            devices.append(UserDevice(deviceID: devicesOfUser.text(0), tags: RegistryRow.tags(devicesOfUser.text(1))))
        }
        return devices
    }

    public func pushOutcome(sequence: UInt64) throws -> PushOutcome {
        defer { pushBySequence.reset() }
        try pushBySequence.set(1, sequence)
        guard try pushBySequence.step(), !pushBySequence.isNull(0) else { return .none }
        guard pushBySequence.int(0) == OutboxState.handed.rawValue else { return .waiting }
        return .handed(PushAck(written: UInt32(truncatingIfNeeded: pushBySequence.int(1)),
                               queued: UInt32(truncatingIfNeeded: pushBySequence.int(2))))
    }

    public func waitingPushes(after cursor: UInt64, limit: Int, nowMs: UInt64) throws -> [OutboxEntry] {
        defer { waitingPage.reset() }
        try waitingPage.set(1, cursor)
        try waitingPage.set(2, nowMs)
        try waitingPage.set(3, Int64(limit))
        var entries: [OutboxEntry] = []
        while try waitingPage.step() {
            let sequence = UInt64(bitPattern: waitingPage.int(0))
            // A row that does not decode was not written by a store: skipped, not fatal.
            guard let push = OutboxEntry.decode(waitingPage.blob(1)) else { continue }
            entries.append(OutboxEntry(sequence: sequence, push: push, expiresAt: UInt64(bitPattern: waitingPage.int(2)),
                                       createdAt: UInt64(bitPattern: waitingPage.int(3))))
        }
        return entries
    }

    public func idempotencyRecord(_ key: IdempotencyKey) throws -> IdempotencyRecord? {
        defer { idempotencyByKey.reset() }
        try idempotencyByKey.set(1, key.scope)
        try idempotencyByKey.set(2, key.key)
        guard try idempotencyByKey.step() else { return nil }
        let id = PayloadID(high: UInt64(bitPattern: idempotencyByKey.int(1)), low: UInt64(bitPattern: idempotencyByKey.int(2)))
        return IdempotencyRecord(key: key, requestHash: idempotencyByKey.blob(0), id: id,
                                 payloadExpiresAt: UInt64(bitPattern: idempotencyByKey.int(3)),
                                 expiresAt: UInt64(bitPattern: idempotencyByKey.int(4)))
    }

    public func apiToken(id: String) throws -> APITokenRecord? {
        defer { apiTokenByID.reset() }
        try apiTokenByID.set(1, id)
        return try apiTokenByID.step() ? APITokenTable.record(apiTokenByID) : nil
    }

    public func allIDs() throws -> [(PayloadID, UInt64)] {
        try everyID.bind([])
        defer { everyID.reset() }
        var all: [(PayloadID, UInt64)] = []
        while try everyID.step() {
            all.append((PayloadID(high: UInt64(bitPattern: everyID.int(0)), low: UInt64(bitPattern: everyID.int(1))),
                        UInt64(everyID.int(2))))
        }
        return all
    }

    public func unread(userID: UInt64, _ query: UnreadQuery) throws -> UnreadPage {
        // One row more than asked tells whether another page follows.
        try unreadPage.bind([.uint(userID), .uint(query.before), .uint(query.nowMs), .text(query.deviceID), .int(Int64(query.limit + 1))])
        defer { unreadPage.reset() }
        var ids: [PayloadID] = []
        var next = query.cursor
        var hasMore = false
        while try unreadPage.step() {
            if ids.count == query.limit {
                hasMore = true
                break
            }
            next = UInt64(unreadPage.int(0))
            ids.append(PayloadID(high: UInt64(bitPattern: unreadPage.int(1)), low: UInt64(bitPattern: unreadPage.int(2))))
        }
        guard hasMore && query.countsOlder else { return UnreadPage(ids: ids, cursor: next, hasMore: hasMore) }
        try unreadOlder.bind([.uint(userID), .uint(next), .uint(query.nowMs), .text(query.deviceID)])
        defer { unreadOlder.reset() }
        let older = try unreadOlder.step() ? UInt64(clamping: unreadOlder.int(0)) : 0
        return UnreadPage(ids: ids, cursor: next, hasMore: hasMore, older: older)
    }

    public func user(named name: String) throws -> UserRecord? {
        try userByName.bind([.text(name)])
        defer { userByName.reset() }
        guard try userByName.step() else { return nil }
        return UserRecord(id: UInt64(bitPattern: userByName.int(0)), name: userByName.text(1),
                          passwordHash: userByName.text(2), createdAt: UInt64(bitPattern: userByName.int(3)))
    }

    public func usersRevision() throws -> UInt64 {
        try refreshRevisions()
        return lastUsersRevision
    }

    public func registrySequence() throws -> UInt64 {
        try refreshRevisions()
        return lastRegistrySequence
    }

    /// The API tokens' change cursor: one `PRAGMA data_version` while nobody committed.
    public func apiTokensRevision() throws -> UInt64 {
        try refreshRevisions()
        return lastAPITokensRevision
    }

    /// `PRAGMA data_version` changes whenever another connection (this store's writer
    /// thread, or `securepush user remove` or `device revoke` in another process) commits;
    /// it reads a counter in the WAL's shared memory, without touching a page. Only then
    /// are the users revision and the registry's change counter read. Read in that order,
    /// a commit between the two reads is seen on the next call, never missed.
    private func refreshRevisions() throws {
        // A request asks for both revisions; one look per snapshot is enough.
        if inSnapshot && revisionsReadInSnapshot { return }
        revisionsReadInSnapshot = inSnapshot
        defer { dataVersion.reset() }
        guard try dataVersion.step() else { return }
        let version = dataVersion.int(0)
        if version == lastDataVersion { return }
        defer { revisions.reset() }
        guard try revisions.step() else { return }
        lastUsersRevision = UInt64(bitPattern: revisions.int(0))
        lastRegistrySequence = UInt64(bitPattern: revisions.int(1))
        // No row before the first token is issued: NULL, read as 0.
        lastAPITokensRevision = UInt64(bitPattern: revisions.int(2))
        lastDataVersion = version
    }

    public func enrolledDevice(_ deviceID: String) throws -> EnrolledDevice? {
        try registry.enrolledDevice(deviceID)
    }

    public func deviceKeys(userID: UInt64) throws -> UserKeys {
        try registry.keys(userID: userID)
    }

    public func registryChanges(after cursor: UInt64, limit: Int, maxBytes: Int) throws -> RegistryPage {
        try registry.changes(after: cursor, limit: limit, maxBytes: maxBytes)
    }

    public func registryChangeCounts(after cursor: UInt64) throws -> RegistryChangeCounts {
        try registry.counts(after: cursor)
    }
}
