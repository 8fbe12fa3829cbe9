import CSQLite
import PushClock
import PushSession
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
    private let audienceMember: SQLiteStatement
    private let addReceipt: SQLiteStatement
    private let markRead: SQLiteStatement
    private let countRead: SQLiteStatement
    private let countReadAndFetches: SQLiteStatement
    private let markRecalled: SQLiteStatement
    private let markFetched: SQLiteStatement
    private let emptyExpired: SQLiteStatement
    private let forgetOld: SQLiteStatement
    private let forgetReceipts: SQLiteStatement
    private let insertPush: SQLiteStatement
    private let markHanded: SQLiteStatement
    private let forgetPushes: SQLiteStatement
    private let liveKey: SQLiteStatement
    private let recordKey: SQLiteStatement
    private let forgetKeys: SQLiteStatement
    // Prepared once: `sqlite3_exec` parses its SQL again on every transaction.
    private let begin: SQLiteStatement
    private let commitTransaction: SQLiteStatement
    private let rollback: SQLiteStatement

    /// How long an emptied row is kept so FETCH can still say GONE rather than NOT_FOUND.
    public static let tombstoneRetentionMs: UInt64 = 7 * 24 * 3600 * 1000

    /// Opens the database and the data keys beside it (creating either if missing).
    public init(path: String) throws(SQLiteError) {
        connection = try SQLitePayloadDatabase.open(path: path)
        sealer = try PayloadSealer(databasePath: path)
        resealer = try PayloadResealer(connection: connection, sealer: sealer)
        insert = try connection.prepare("""
            INSERT INTO payloads (id_high, id_low, user_id, key_id, body, created_at, expires_at, read_limit, sender, audience)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)
        insertAudience = try connection.prepare("INSERT OR IGNORE INTO audiences (seq, device) VALUES (?, ?)")
        userByName = try connection.prepare("SELECT id FROM users WHERE name = ?")
        lookup = try connection.prepare("SELECT user_id, read_limit, read_count, life, audience FROM payloads WHERE seq = ?")
        audienceMember = try connection.prepare("SELECT 1 FROM audiences WHERE seq = ? AND device = ?")
        addReceipt = try connection.prepare("INSERT OR IGNORE INTO receipts (seq, device) VALUES (?, ?)")
        // The receipt that reads the payload out, its new life decided by `PayloadLife`.
        markRead = try connection.prepare("UPDATE payloads SET read_count = read_count + 1, life = ?, body = NULL, key_id = NULL WHERE seq = ?")
        // A receipt that leaves the payload readable changes no column an index covers or
        // filters on; `markRead` names `life`, which makes SQLite rewrite the entry of
        // `live_by_user` (a partial index on live rows) for every ACK.
        countRead = try connection.prepare("UPDATE payloads SET read_count = read_count + 1 WHERE seq = ?")
        countReadAndFetches = try connection.prepare("""
            UPDATE payloads SET read_count = read_count + 1, fetch_count = fetch_count + ?, fetched_at = max(fetched_at, ?) WHERE seq = ?
            """)
        markRecalled = try connection.prepare("UPDATE payloads SET life = \(PayloadLife.recalled.rawValue), body = NULL, key_id = NULL WHERE seq = ?")
        markFetched = try connection.prepare("UPDATE payloads SET fetch_count = fetch_count + ?, fetched_at = max(fetched_at, ?) WHERE seq = ?")
        emptyExpired = try connection.prepare("UPDATE payloads SET life = \(PayloadLife.expired.rawValue), body = NULL, key_id = NULL WHERE expires_at <= ? AND life = \(PayloadLife.live.rawValue)")
        forgetOld = try connection.prepare("DELETE FROM payloads WHERE expires_at <= ?")
        forgetReceipts = try connection.prepare("DELETE FROM receipts WHERE seq NOT IN (SELECT seq FROM payloads)")
        insertPush = try connection.prepare("INSERT INTO pushes (seq, push) VALUES (?, ?)")
        markHanded = try connection.prepare("""
            UPDATE pushes SET state = \(OutboxState.handed.rawValue), written = ?, queued = ?, handed_at = ?
            WHERE seq = ? AND state = \(OutboxState.waiting.rawValue)
            """)
        forgetPushes = try connection.prepare("DELETE FROM pushes WHERE seq NOT IN (SELECT seq FROM payloads)")
        forgetAudiences = try connection.prepare("DELETE FROM audiences WHERE seq NOT IN (SELECT seq FROM payloads)")
        liveKey = try connection.prepare("SELECT 1 FROM idempotency_keys WHERE scope = ? AND key = ? AND expires_at > ?")
        recordKey = try connection.prepare("""
            INSERT OR REPLACE INTO idempotency_keys (scope, key, request_hash, id, payload_expires_at, expires_at)
            VALUES (?, ?, ?, ?, ?, ?)
            """)
        forgetKeys = try connection.prepare("DELETE FROM idempotency_keys WHERE expires_at <= ?")
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
            // Resolved inside the transaction a removal would have to wait for: a STORE
            // accepted just before its user was removed leaves no row behind.
            guard let userID = try recipient(new.user) else { return .failed(.unknownUser) }
            if let key = new.idempotency, try isLive(key.key, atMs: new.createdAt) {
                // Taken by a SEND this store did not know to be in flight: the provider retries.
                return .failed(.busy)
            }
            let (keyID, sealed) = try sealer.seal(new.body, id: new.id, userID: userID)
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
            try insert.runBound()
            let sequence = connection.lastInsertedRow
            // The audience, in the payload's transaction ([4.9-4]): rows only for listed devices.
            for device in new.audience.listedDevices {
                try insertAudience.set(1, sequence)
                try insertAudience.set(2, device)
                try insertAudience.runBound()
            }
            if let push = new.push {
                // The push intent, in the same transaction as its payload ([4.17-1]).
                try insertPush.set(1, sequence)
                try insertPush.set(2, OutboxEntry.encode(push))
                try insertPush.runBound()
            }
            if let key = new.idempotency {
                try recordKey.set(1, key.key.scope)
                try recordKey.set(2, key.key.key)
                try recordKey.set(3, key.requestHash)
                try recordKey.set(4, key.id.bytes)
                try recordKey.set(5, key.payloadExpiresAt)
                try recordKey.set(6, key.expiresAt)
                try recordKey.runBound()
            }
            return .stored(sequence: sequence)
        case .ack(let sequence, let userID, let deviceID, let fetched):
            // Idempotent, and a gone payload can still be acknowledged ([4.10-2]).
            guard let row = try receiptState(of: sequence) else { return .failed(.notFound) }
            let admitted = row.listedAudience ? try lists(sequence, deviceID) : true
            guard row.owner == userID, admitted else {
                try record(fetched)
                return .failed(.forbidden)
            }
            try addReceipt.set(1, sequence)
            try addReceipt.set(2, deviceID)
            try addReceipt.runBound()
            let newReceipt = connection.changes == 1
            // Read in this transaction just before, so exact: the full statement only for
            // the receipt that reaches the read limit.
            let readsOut = PayloadLife.readsOut(readCount: row.readCount + 1, readLimit: row.readLimit)
            if newReceipt && !readsOut, let fetched {
                try countReadAndFetches.set(1, Int64(fetched.count))
                try countReadAndFetches.set(2, fetched.lastAtMs)
                try countReadAndFetches.set(3, sequence)
                try countReadAndFetches.runBound()
                return .ok
            }
            if newReceipt && readsOut {
                try markRead.set(1, row.life.afterReceipt(readCount: row.readCount + 1, readLimit: row.readLimit).rawValue)
                try markRead.set(2, sequence)
                try markRead.runBound()
            } else if newReceipt {
                try countRead.set(1, sequence)
                try countRead.runBound()
            }
            try record(fetched)
            return .ok
        case .recall(let sequence):
            // Recalling what is already gone succeeds ([4.11-2]).
            guard try receiptState(of: sequence) != nil else { return .failed(.notFound) }
            try markRecalled.set(1, sequence)
            try markRecalled.runBound()
            return .ok
        case .recordFetches(let tallies):
            for tally in tallies { try record(tally) }
            return .ok
        case .loginAttempt, .tokenFailures:
            // One SQLite store serves its database alone: its own memory holds the limits.
            return .ok
        case .pushesHanded(let handed):
            for push in handed {
                try markHanded.set(1, Int64(push.ack.written))
                try markHanded.set(2, Int64(push.ack.queued))
                try markHanded.set(3, push.handedAt)
                try markHanded.set(4, push.sequence)
                try markHanded.runBound()
            }
            return .ok
        }
    }

    private func record(_ tally: FetchTally?) throws(SQLiteError) {
        guard let tally else { return }
        try markFetched.set(1, Int64(tally.count))
        try markFetched.set(2, tally.lastAtMs)
        try markFetched.set(3, tally.sequence)
        try markFetched.runBound()
    }

    private func isLive(_ key: IdempotencyKey, atMs nowMs: UInt64) throws(SQLiteError) -> Bool {
        defer { liveKey.reset() }
        try liveKey.set(1, key.scope)
        try liveKey.set(2, key.key)
        try liveKey.set(3, nowMs)
        return try liveKey.step()
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
    /// are counted one after the other.
    private func receiptState(of sequence: UInt64) throws(SQLiteError)
        -> (owner: UInt64, readLimit: Int64, readCount: Int64, life: PayloadLife, listedAudience: Bool)? {
        defer { lookup.reset() }
        try lookup.set(1, sequence)
        guard try lookup.step() else { return nil }
        return (UInt64(bitPattern: lookup.int(0)), lookup.int(1), lookup.int(2), PayloadLife(rawValue: lookup.int(3)) ?? .expired,
                lookup.int(4) != PayloadAudience.user.storedKind)
    }

    /// Whether the payload's listed audience holds `deviceID` ([4.9-4]).
    private func lists(_ sequence: UInt64, _ deviceID: String) throws(SQLiteError) -> Bool {
        defer { audienceMember.reset() }
        try audienceMember.set(1, sequence)
        try audienceMember.set(2, deviceID)
        return try audienceMember.step()
    }

    public func sweepExpired(nowMs: UInt64) throws -> Int {
        try connection.execute("BEGIN IMMEDIATE")
        do {
            try emptyExpired.run([.uint(nowMs)])
            let emptied = connection.changes
            let horizon = nowMs > SQLitePayloadWriter.tombstoneRetentionMs ? nowMs - SQLitePayloadWriter.tombstoneRetentionMs : 0
            try forgetOld.run([.uint(horizon)])
            try forgetKeys.run([.uint(nowMs)])
            if connection.changes > 0 {
                try forgetReceipts.run([])
                try forgetPushes.run([])
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
