import CSQLite
import PushClock
import PushSession
import PushStoreLogic
import PushWire

/// The writer thread's side. Bodies are sealed here, on the writer thread, so the event
/// loop never pays for encryption on a STORE.
public final class SQLitePayloadWriter: PayloadWriter {
    private let connection: SQLiteConnection
    private let sealer: PayloadSealer
    private let resealer: PayloadResealer
    private let insert: SQLiteStatement
    private let insertAudience: SQLiteStatement
    private let forgetAudiences: SQLiteStatement
    private let userByName: SQLiteStatement
    /// Recipients looked up in the transaction being committed (a group often holds many
    /// STOREs for few users); emptied with each transaction, so never stale.
    private var recipients: [ExactName: UInt64?] = [:]
    private let lookup: SQLiteStatement
    private let addReceipt: SQLiteStatement
    private let hasReceipt: SQLiteStatement
    private let markRead: SQLiteStatement
    private let countRead: SQLiteStatement
    private let markRecalled: SQLiteStatement
    private let markFetched: SQLiteStatement
    private let emptyExpired: SQLiteStatement
    private let forgetOld: SQLiteStatement
    private let forgetReceipts: SQLiteStatement
    private let markHanded: SQLiteStatement
    private let keyHolder: SQLiteStatement
    private let sealedHolder: SQLiteStatement
    private let keyCursor: SQLiteStatement
    private let freeKey: SQLiteStatement
    // Prepared once: `sqlite3_exec` parses its SQL again on every transaction.
    private let begin: SQLiteStatement
    private let commitTransaction: SQLiteStatement
    private let rollback: SQLiteStatement

    /// Opens the database and the data keys beside it (creating either if missing).
    public init(path: String) throws(SQLiteError) {
        connection = try SQLitePayloadDatabase.open(path: path)
        sealer = try PayloadSealer(databasePath: path)
        resealer = try PayloadResealer(connection: connection, sealer: sealer)
        // A SEND's payload, push and key are this one row ([4.17-1], [4.17-5]).
        insert = try connection.prepare("""
            INSERT INTO payloads (id_high, id_low, user_id, key_id, body, created_at, expires_at, read_limit, sender, audience,
                                  push, outbox, key_scope, idem_key, request_hash, key_expires_at, sealed)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)
        // On `payloads_sealed_id`: a sealed id is the sender's to derive, so it may repeat ([4.19-2]).
        sealedHolder = try connection.prepare("SELECT 1 FROM payloads WHERE id_high = ? AND id_low = ? AND sealed = 1")
        keyCursor = try connection.prepare("SELECT coalesce(max(change_seq), 0) FROM registrations WHERE user_id = ?")
        insertAudience = try connection.prepare("INSERT OR IGNORE INTO audiences (seq, device) VALUES (?, ?)")
        userByName = try connection.prepare("SELECT id FROM users WHERE name = ?")
        // What `PayloadLife.receipt` decides from, in one read of the row; whether the device
        // acknowledged it before is learnt from its receipt's insert (`receiptWrite`).
        lookup = try connection.prepare("""
            SELECT user_id, read_limit, read_count, life,
                   audience = \(PayloadAudience.user.storedKind) OR EXISTS (SELECT 1 FROM audiences a WHERE a.seq = ?1 AND a.device = ?2)
            FROM payloads WHERE seq = ?1
            """)
        hasReceipt = try connection.prepare("SELECT 1 FROM receipts WHERE seq = ? AND device = ?")
        addReceipt = try connection.prepare("INSERT OR IGNORE INTO receipts (seq, device) VALUES (?, ?)")
        // The receipt that reads the payload out ([4.10-1]): one update, no receipt row.
        markRead = try connection.prepare("""
            UPDATE payloads SET read_count = ?, life = \(PayloadLife.readOut.rawValue), body = NULL, key_id = NULL,
                                fetch_count = fetch_count + ?, fetched_at = max(fetched_at, ?)
            WHERE seq = ?
            """)
        // A receipt that leaves the payload readable changes no column an index covers or
        // filters on; `markRead` names `life`, which makes SQLite rewrite the entry of
        // `live_by_user` (a partial index on live rows) for every ACK.
        countRead = try connection.prepare("""
            UPDATE payloads SET read_count = ?, fetch_count = fetch_count + ?, fetched_at = max(fetched_at, ?) WHERE seq = ?
            """)
        markRecalled = try connection.prepare("UPDATE payloads SET life = \(PayloadLife.recalled.rawValue), body = NULL, key_id = NULL WHERE seq = ?")
        markFetched = try connection.prepare("UPDATE payloads SET fetch_count = fetch_count + ?, fetched_at = max(fetched_at, ?) WHERE seq = ?")
        emptyExpired = try connection.prepare("UPDATE payloads SET life = \(PayloadLife.expired.rawValue), body = NULL, key_id = NULL WHERE expires_at <= ? AND life = \(PayloadLife.live.rawValue)")
        forgetOld = try connection.prepare("DELETE FROM payloads WHERE expires_at <= ?")
        forgetReceipts = try connection.prepare("DELETE FROM receipts WHERE seq NOT IN (SELECT seq FROM payloads)")
        // The gateway's answer, on the payload's row ([4.12-2]).
        markHanded = try connection.prepare("""
            UPDATE payloads SET outbox = \(OutboxState.handed.rawValue), written = ?, queued = ?, handed_at = ?
            WHERE seq = ? AND outbox = \(OutboxState.waiting.rawValue)
            """)
        forgetAudiences = try connection.prepare("DELETE FROM audiences WHERE seq NOT IN (SELECT seq FROM payloads)")
        keyHolder = try connection.prepare("SELECT seq, key_expires_at FROM payloads WHERE key_scope = ? AND idem_key = ?")
        freeKey = try connection.prepare("""
            UPDATE payloads SET key_scope = NULL, idem_key = NULL, request_hash = NULL, key_expires_at = NULL WHERE seq = ?
            """)
        begin = try connection.prepare("BEGIN IMMEDIATE")
        commitTransaction = try connection.prepare("COMMIT")
        rollback = try connection.prepare("ROLLBACK")
    }

    public func commit(_ operations: [WriteOperation]) throws -> [WriteOutcome] {
        try begin.runBound()
        do {
            // Asked while holding the write lock, which `key prune` holds while it removes
            // keys: a key this thread has not seen replaced is never pruned under it. A
            // file that cannot be read now keeps the keys already known.
            _ = try? sealer.ring.refreshIfChanged()
            recipients.removeAll(keepingCapacity: true)
            var outcomes: [WriteOutcome] = []
            outcomes.reserveCapacity(operations.count)
            for operation in operations {
                outcomes.append(try apply(operation))
            }
            try commitTransaction.runBound()
            return outcomes
        } catch {
            try? rollback.runBound()
            throw error
        }
    }

    private func apply(_ operation: WriteOperation) throws(SQLiteError) -> WriteOutcome {
        switch operation {
        case .store(let new):
            return try store(new)
        case .ack(let sequence, let userID, let deviceID, let fetched, _):
            return try acknowledge(sequence, userID: userID, deviceID: deviceID, fetched: fetched)
        case .recall(let sequence):
            // Recalling what is already gone succeeds ([4.11-2]).
            guard try exists(sequence) else { return .failed(.notFound) }
            try markRecalled.set(1, sequence)
            try markRecalled.runBound()
            return .ok
        case .recordFetches(let tallies):
            for tally in tallies { try record(tally) }
            return .ok
        case .deviceKey(let change):
            return try RegistryTable.setKey(change, on: connection) ? .ok : .failed(.badCredentials)
        case .loginAttempt, .tokenFailures:
            // One SQLite store serves its database alone: its own memory holds the limits.
            return .ok
        case .pushesHanded(let handed):
            try recordHanded(handed)
            return .ok
        }
    }

    /// A STORE: the payload's row, sealed, and its audience's rows.
    private func store(_ new: NewPayload) throws(SQLiteError) -> WriteOutcome {
        // Resolved inside the transaction a removal would have to wait for: a STORE
        // accepted just before its user was removed leaves no row behind.
        guard let userID = try recipient(new.user) else { return .failed(.unknownUser) }
        if new.sealed, try sealedIDTaken(new.id) { return .failed(.conflict) }
        if let key = new.idempotency, let holder = try keyHolder(key.key) {
            // Taken by a SEND the request's read did not see: the provider retries.
            guard holder.expiresAt == new.keyTakenFromExpiry else { return .failed(.busy) }
            // Forgotten, as the request's read found it, but still on its old row: this SEND takes it.
            try freeKey.set(1, holder.sequence)
            try freeKey.runBound()
        }
        let (keyID, sealed) = try SQLiteError.reporting { () throws(StoreBackendError) in try sealer.seal(new.body, id: new.id, userID: userID) }
        try insert.set(1, new.id.high)
        try insert.set(2, new.id.low)
        try insert.set(3, userID)
        try insert.set(4, Int64(keyID))
        try insert.set(5, sealed)
        try insert.set(6, new.createdAt)
        try insert.set(7, new.expiresAt)
        try insert.set(8, Int64(new.readLimit))
        try insert.set(9, new.sender)
        try insert.set(10, new.audience.storedKind)
        let outbox = new.outbox
        try insert.set(11, outbox?.push)
        try insert.set(12, outbox?.state.rawValue)
        let key = new.idempotency
        try insert.set(13, key?.key.scope)
        try insert.set(14, key?.key.key)
        try insert.set(15, key?.requestHash)
        try insert.set(16, key?.expiresAt)
        try insert.set(17, Int64(new.sealed ? 1 : 0))
        try insert.runBound()
        let sequence = connection.lastInsertedRow
        // The audience, in the payload's transaction ([4.9-4]): rows only for listed devices.
        for device in new.audience.listedDevices {
            try insertAudience.set(1, sequence)
            try insertAudience.set(2, device)
            try insertAudience.runBound()
        }
        return .stored(sequence: sequence, keyCursor: new.sealed ? try keyCursor(userID) : nil)
    }

    private func sealedIDTaken(_ id: PayloadID) throws(SQLiteError) -> Bool {
        defer { sealedHolder.reset() }
        try sealedHolder.set(1, id.high)
        try sealedHolder.set(2, id.low)
        return try sealedHolder.step()
    }

    /// The recipient's key cursor as this transaction sees it ([4.18-3], [4.18-5]).
    private func keyCursor(_ userID: UInt64) throws(SQLiteError) -> UInt64 {
        defer { keyCursor.reset() }
        try keyCursor.set(1, userID)
        return try keyCursor.step() ? UInt64(bitPattern: keyCursor.int(0)) : 0
    }

    /// A read receipt, with the FETCH statistics it carries.
    private func acknowledge(_ sequence: UInt64, userID: UInt64, deviceID: String, fetched: FetchTally?) throws(SQLiteError) -> WriteOutcome {
        // The row as this transaction sees it: receipts are decided one after another.
        guard let row = try receiptRow(sequence, deviceID) else { return .failed(.notFound) }
        let tally = fetched ?? FetchTally(sequence: sequence, count: 0, lastAtMs: 0)
        let decision = try receiptWrite(row, userID, sequence, deviceID)
        switch decision {
        case .refused(let status):
            try record(fetched)
            return .failed(status)
        case .unchanged:
            try record(fetched)
        case .counted(let readCount), .readOut(let readCount):
            // A counted receipt's row went in as the decision was made; the one that reads
            // the payload out has none, and its statement erases the body too.
            let statement = if case .readOut = decision { markRead } else { countRead }
            try statement.set(1, readCount)
            try statement.set(2, Int64(tally.count))
            try statement.set(3, tally.lastAtMs)
            try statement.set(4, sequence)
            try statement.runBound()
        }
        return .ok
    }

    /// Gateways' answers to outbox pushes.
    private func recordHanded(_ handed: [HandedPush]) throws(SQLiteError) {
        for push in handed {
            try markHanded.set(1, Int64(push.ack.written))
            try markHanded.set(2, Int64(push.ack.queued))
            try markHanded.set(3, push.handedAt)
            try markHanded.set(4, push.sequence)
            try markHanded.runBound()
        }
    }

    private func record(_ tally: FetchTally?) throws(SQLiteError) {
        guard let tally else { return }
        try markFetched.set(1, Int64(tally.count))
        try markFetched.set(2, tally.lastAtMs)
        try markFetched.set(3, tally.sequence)
        try markFetched.runBound()
    }

    /// The row holding `key`, and when the key is forgotten.
    private func keyHolder(_ key: IdempotencyKey) throws(SQLiteError) -> (sequence: Int64, expiresAt: UInt64)? {
        defer { keyHolder.reset() }
        try keyHolder.set(1, key.scope)
        try keyHolder.set(2, key.key)
        guard try keyHolder.step() else { return nil }
        return (keyHolder.int(0), UInt64(bitPattern: keyHolder.int(1)))
    }

    private func recipient(_ name: String) throws(SQLiteError) -> UInt64? {
        if let known = recipients[ExactName(name)] { return known }
        defer { userByName.reset() }
        try userByName.set(1, name)
        let id = try userByName.step() ? UInt64(bitPattern: userByName.int(0)) : nil
        if recipients.count < 10_000 { recipients[ExactName(name)] = .some(id) }
        return id
    }

    /// Looked up inside the transaction, so two racing receipts for a read-once payload
    /// are decided one after the other.
    private func receiptRow(_ sequence: UInt64, _ deviceID: String) throws(SQLiteError) -> ReceiptRow? {
        defer { lookup.reset() }
        try lookup.set(1, sequence)
        try lookup.set(2, deviceID)
        guard try lookup.step() else { return nil }
        return ReceiptRow(owner: UInt64(bitPattern: lookup.int(0)), admitsDevice: lookup.int(4) != 0,
                          life: PayloadLife(rawValue: lookup.int(3)) ?? .expired, readLimit: lookup.int(1), readCount: lookup.int(2),
                          acknowledged: false)
    }

    /// `PayloadLife.receipt` on `row`, whose `acknowledged` is not read yet: a receipt that
    /// would count is inserted first, and one already there (the insert adds nothing) was
    /// acknowledged before; only a receipt that would read the payload out looks for it.
    private func receiptWrite(_ row: ReceiptRow, _ userID: UInt64, _ sequence: UInt64, _ deviceID: String) throws(SQLiteError) -> ReceiptWrite {
        var row = row
        let write = PayloadLife.receipt(on: row, from: userID)
        switch write {
        case .counted:
            try addReceipt.set(1, sequence)
            try addReceipt.set(2, deviceID)
            try addReceipt.runBound()
            row.acknowledged = connection.changes == 0
        case .readOut:
            defer { hasReceipt.reset() }
            try hasReceipt.set(1, sequence)
            try hasReceipt.set(2, deviceID)
            row.acknowledged = try hasReceipt.step()
        case .refused, .unchanged:
            return write
        }
        return row.acknowledged ? PayloadLife.receipt(on: row, from: userID) : write
    }

    /// Whether the payload exists (RECALL).
    private func exists(_ sequence: UInt64) throws(SQLiteError) -> Bool {
        defer { lookup.reset() }
        try lookup.set(1, sequence)
        try lookup.set(2, "")
        return try lookup.step()
    }

    public func sweepExpired(nowMs: UInt64) throws -> Int {
        try connection.execute("BEGIN IMMEDIATE")
        do {
            try emptyExpired.run([.uint(nowMs)])
            let emptied = connection.changes
            let horizon = nowMs > PayloadLife.tombstoneRetentionMs ? nowMs - PayloadLife.tombstoneRetentionMs : 0
            // A SEND's push and key go with its row.
            try forgetOld.run([.uint(horizon)])
            if connection.changes > 0 {
                try forgetReceipts.run([])
                try forgetAudiences.run([])
            }
            _ = try RegistryTable.pruneExpiredRevoked(nowMs: nowMs, on: connection)
            try connection.execute("COMMIT")
            if emptied > 0 { try connection.execute("PRAGMA incremental_vacuum") }
            return emptied
        } catch {
            try? connection.execute("ROLLBACK")
            throw error
        }
    }

    /// Notices a data key added by `securepush key rotate` (one stat when nothing changed)
    /// and re-seals one batch of rows still under an older key.
    public func idleStep(nowMs: UInt64) throws -> Bool {
        _ = try? sealer.ring.refreshIfChanged()
        return try resealer.step()
    }

    // MARK: users (administration, not the request path)

    /// Adds a user with a fresh identity; false if the name is taken.
    public func addUser(_ name: String, passwordHash: String, nowMs: UInt64) throws -> Bool {
        try UserTable.add(name, passwordHash: passwordHash, nowMs: nowMs, on: connection) != nil
    }

    /// Removes a user with every payload addressed to it; false if there is no such user.
    public func removeUser(_ name: String, clock: () -> UInt64 = Clocks.wallMilliseconds) throws -> Bool {
        try UserTable.remove(name, clock: clock, on: connection) != nil
    }

    public func checkpoint() throws {
        try connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    }
}
