import PushPostgres
import PushStoreLogic
import PushWire

/// The store's writes as PostgreSQL statements. Every one is a single statement whose
/// effect is decided by the row as it is when the statement gets to it, never by what the
/// store read earlier: several stores write the same rows at once, and each conditional
/// update re-reads the row it waited for (READ COMMITTED's re-check), so increments add
/// up and a condition holds for exactly one of two racing writers.
enum PostgresWriteStatements {
    /// A STORE ready to insert: its recipient's id as the store last knew it, its body sealed
    /// for that id.
    struct SealedPayload {
        var payload: NewPayload
        var userID: UInt64
        var keyID: UInt32
        var sealed: [UInt8]
    }

    /// Rows per INSERT: bounded messages, and a bounded wait for the rows that come first.
    static let rowsPerInsert = 4096

    /// The STOREs as one INSERT over arrays (one element per row), a statement of a fixed
    /// shape however many rows it carries, so it is prepared once per connection. Each row
    /// goes in only if its recipient's name still belongs to the id its body was sealed for,
    /// in the committing transaction; the foreign key holds that user until the commit, and
    /// `RETURNING` says which rows went in and as which seq. A SEND's push (owned by the
    /// store loop `owner` until `leaseUntil`) and its key are columns of the same row
    /// ([4.17-1], [4.17-5]): one row per message.
    static func insert(_ rows: ArraySlice<SealedPayload>, owner: String, leaseUntil: UInt64) -> PostgresStatement {
        let outboxes = rows.map(\.payload.outbox)
        let keys = rows.map(\.payload.idempotency)
        return PostgresStatement("""
            INSERT INTO payloads (id, user_id, key_id, body, created_at, expires_at, read_limit, sender, audience,
                                  push, outbox, outbox_owner, lease_until, key_scope, idem_key, request_hash, key_expires_at, sealed)
            SELECT v.id, u.id, v.key_id, v.body, v.created_at, v.expires_at, v.read_limit, v.sender, v.audience,
                   v.push, v.outbox, v.outbox_owner, v.lease_until, v.key_scope, v.idem_key, v.request_hash, v.key_expires_at, v.sealed
            FROM unnest($1::bytea[], $2::text[], $3::bigint[], $4::bigint[], $5::bytea[], $6::bigint[], $7::bigint[], $8::bigint[],
                        $9::text[], $10::bigint[], $11::bytea[], $12::integer[], $13::text[], $14::bigint[], $15::text[], $16::text[],
                        $17::bytea[], $18::bigint[], $19::bool[])
                 AS v (id, name, user_id, key_id, body, created_at, expires_at, read_limit, sender, audience, push, outbox,
                       outbox_owner, lease_until, key_scope, idem_key, request_hash, key_expires_at, sealed)
            JOIN users u ON u.name = v.name AND u.id = v.user_id
            RETURNING id, seq,
                      CASE WHEN sealed THEN (SELECT coalesce(max(r.change_seq), 0) FROM registrations r WHERE r.user_id = payloads.user_id) END
            """, [
            .bytesArray(rows.map { $0.payload.id.bytes }), .textArray(rows.map { $0.payload.user }),
            .int64Array(rows.map { Int64(clamping: $0.userID) }), .int64Array(rows.map { Int64($0.keyID) }),
            .bytesArray(rows.map(\.sealed)), .int64Array(rows.map { Int64(clamping: $0.payload.createdAt) }),
            .int64Array(rows.map { Int64(clamping: $0.payload.expiresAt) }), .int64Array(rows.map { Int64($0.payload.readLimit) }),
            .textArray(rows.map { $0.payload.sender }),
            .int64Array(rows.map { $0.payload.audience.storedKind }),
            .bytesArray(outboxes.map { $0?.push }), .int32Array(outboxes.map { $0.map { Int32($0.state.rawValue) } }),
            .textArray(outboxes.map { $0 == nil ? nil : owner }),
            .int64Array(outboxes.map { $0 == nil ? nil : Int64(clamping: leaseUntil) }),
            .textArray(keys.map { $0?.key.scope }), .textArray(keys.map { $0?.key.key }), .bytesArray(keys.map { $0?.requestHash }),
            .int64Array(keys.map { $0.map { Int64(clamping: $0.expiresAt) } }),
            .boolArray(rows.map(\.payload.sealed)),
        ], prepared: true)
    }

    /// Locks the registry's change counter until the transaction ends, as every registry
    /// change does first (`PostgresRegistryTable.lockChanges`): the group's key changes then
    /// read the registrations as committed, and take the counter before any user row.
    static let lockRegistryChanges = PostgresStatement("SELECT value FROM store_meta WHERE key = 'registry_seq' FOR UPDATE", [],
                                                       prepared: true)

    /// A LOGIN's device key on the enrolled registration it names, with the next change
    /// number ([4.6-5], [4.16-5]): one row back when it was set, none when that registration
    /// is no longer enrolled (the counter untouched then).
    static func setDeviceKey(_ change: DeviceKeyChange) -> PostgresStatement {
        PostgresStatement("""
            WITH target AS (SELECT id FROM registrations
                            WHERE device_id = $1 AND issued_at = $2 AND state = \(RegistryEntry.State.enrolled.sql)),
                 seq AS (UPDATE store_meta SET value = value + 1
                         WHERE key = 'registry_seq' AND EXISTS (SELECT 1 FROM target) RETURNING value)
            UPDATE registrations r SET key_suite = $3, device_key = $4, key_id = $5, change_seq = seq.value
            FROM seq, target WHERE r.id = target.id
            RETURNING r.change_seq
            """, [.text(change.deviceID), .uint(change.issuedAt), .int32(Int32(change.key.suite.rawValue)), .bytes(change.key.bytes),
                  .int64(DeviceKeyColumns.stored(change.keyID))], prepared: true)
    }

    /// `pg_advisory_xact_lock` class of the recipients' locks ("SP").
    static let recipientLockClass: Int32 = 0x5350

    /// Locks the recipients of a group's STOREs until it commits, before any of its rows
    /// takes a seq. SYNC's cursor is a seq ([4.9-2]): were a STORE at one store to take seq
    /// 100 and commit after one at another store took 101 and committed, a device could
    /// list 101, move its cursor past 100, and never list 100. With the lock, seqs for one
    /// user are taken in the order their transactions commit. Keys in ascending order (the
    /// array's, kept by `WITH ORDINALITY`), so two stores' groups never wait on each other
    /// in a circle; a hash shared by two users only makes them wait for each other.
    static func lockRecipients(_ userIDs: Set<UInt64>) -> PostgresStatement? {
        let keys = Set(userIDs.map { Int32(truncatingIfNeeded: $0 ^ ($0 >> 32)) }).sorted()
        guard !keys.isEmpty else { return nil }
        return PostgresStatement("""
            SELECT count(*) FROM unnest($2::integer[]) WITH ORDINALITY AS v (k, n), LATERAL pg_advisory_xact_lock($1::integer, v.k) AS l
            """, [.int32(recipientLockClass), .int32Array(keys)], prepared: true)
    }

    /// The read receipts of a group for one payload, as `PayloadLife.receipt` decided them
    /// one after another from the row the requests read: the read count it had and the one
    /// it gets, whether it is read out, and the devices whose receipt rows go in.
    struct ReceiptWrites {
        var sequence: UInt64
        var readCountBefore: Int64
        var readCount: Int64
        var readsOut: Bool
        var devices: [String]
    }

    /// `receipts`' text, built once: the states are `PayloadLife`'s.
    private static let receiptsSQL = """
        WITH v AS (SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bool[]) AS v (seq, before, after, reads_out)),
             counted AS (UPDATE payloads p SET read_count = v.after
                         FROM v WHERE p.seq = v.seq AND NOT v.reads_out
                                  AND p.life = \(PayloadLife.live.rawValue) AND p.read_count = v.before
                         RETURNING p.seq),
             read_out AS (UPDATE payloads p SET read_count = v.after, life = \(PayloadLife.readOut.rawValue), body = NULL, key_id = NULL
                          FROM v WHERE p.seq = v.seq AND v.reads_out
                                   AND p.life = \(PayloadLife.live.rawValue) AND p.read_count = v.before
                          RETURNING p.seq),
             r AS (INSERT INTO receipts (seq, device)
                   SELECT d.seq, d.device FROM unnest($5::bigint[], $6::text[]) AS d (seq, device)
                   WHERE d.seq IN (SELECT seq FROM counted) ORDER BY d.seq, d.device
                   ON CONFLICT DO NOTHING)
        SELECT seq FROM counted UNION ALL SELECT seq FROM read_out
        """

    /// A group's read receipts ([4.10-1], [4.10-2]) as one prepared statement over arrays,
    /// one element per payload: the values `PayloadLife.receipt` decided, bound, each
    /// written only if the row is still live with the read count they were decided from.
    /// A receipt that leaves the payload readable sets its count and adds the devices'
    /// receipt rows; the one that reads it out sets its count, its life and erases its
    /// body, in one update and without a receipt row. Returns the seqs written; a payload
    /// another store changed meanwhile is not, and its receipts are decided again from the
    /// row as it is then (`PostgresGroupCommit`).
    static func receipts(_ writes: [ReceiptWrites]) -> PostgresStatement {
        let sorted = writes.sorted { $0.sequence < $1.sequence }
        let devices = sorted.flatMap { write in write.readsOut ? [] : write.devices.map { (write.sequence, $0) } }
        return PostgresStatement(receiptsSQL, [
            .int64Array(sorted.map { Int64(clamping: $0.sequence) }), .int64Array(sorted.map(\.readCountBefore)),
            .int64Array(sorted.map(\.readCount)), .boolArray(sorted.map(\.readsOut)),
            .int64Array(devices.map { Int64(clamping: $0.0) }), .textArray(devices.map(\.1)),
        ], prepared: true)
    }

    /// The rows receipts decide from (`ReceiptRow`), read afresh for receipts whose row
    /// changed after the request read it: one row per (seq, device), by ordinal (from 1),
    /// the owner NULL when the payload is gone.
    static func receiptRows(_ acks: [(sequence: UInt64, deviceID: String)]) -> PostgresStatement {
        PostgresStatement("""
            SELECT v.n, p.user_id, p.read_limit, p.read_count, p.life,
                   p.audience = \(PayloadAudience.user.storedKind)
                       OR EXISTS (SELECT 1 FROM audiences a WHERE a.seq = p.seq AND a.device = v.device),
                   EXISTS (SELECT 1 FROM receipts r WHERE r.seq = p.seq AND r.device = v.device)
            FROM unnest($1::bigint[], $2::text[]) WITH ORDINALITY AS v (seq, device, n) LEFT JOIN payloads p ON p.seq = v.seq
            """, [.int64Array(acks.map { Int64(clamping: $0.sequence) }), .textArray(acks.map(\.deviceID))], prepared: true)
    }

    /// What `receiptRows` found, by ordinal: nil for a payload gone.
    static func decodeReceiptRows(_ result: PostgresResult) throws(PostgresError) -> [Int: ReceiptRow?] {
        var rows: [Int: ReceiptRow?] = [:]
        for row in result.rows.indices {
            let ordinal = Int(try result.int64(row, 0))
            guard !result.isNull(row, 1) else {
                rows[ordinal] = .some(nil)
                continue
            }
            rows[ordinal] = ReceiptRow(owner: try result.uint(row, 1), admitsDevice: try result.bool(row, 5),
                                       life: PayloadLife(rawValue: try result.int64(row, 4)) ?? .expired,
                                       readLimit: try result.int64(row, 2), readCount: try result.int64(row, 3),
                                       acknowledged: try result.bool(row, 6))
        }
        return rows
    }

    /// `recalls`' text, built once.
    private static let recallsSQL = """
        WITH u AS (UPDATE payloads SET life = \(PayloadLife.recalled.rawValue), body = NULL, key_id = NULL
                   WHERE seq IN (SELECT unnest($1::bigint[])) RETURNING seq)
        SELECT v.n FROM unnest($1::bigint[]) WITH ORDINALITY AS v (seq, n) WHERE v.seq IN (SELECT seq FROM u)
        """

    /// A group's RECALLs ([4.11-1], [4.11-2]) as one prepared statement over an array: each
    /// payload gone at once, body erased. Returns the ordinals (from 1) of the RECALLs whose
    /// payload exists (a seq twice in the array: both); one not returned is NOT_FOUND.
    static func recalls(_ sequences: [UInt64]) -> PostgresStatement {
        PostgresStatement(recallsSQL, [.int64Array(sequences.map { Int64(clamping: $0) })], prepared: true)
    }

    /// Fetch statistics ([4.8-3]), added to what other stores counted, over arrays (one
    /// prepared statement). Rows in seq order, so two stores' batches lock shared rows in
    /// the same order.
    static func recordFetches(_ tallies: [FetchTally]) -> [PostgresStatement] {
        let sorted = tallies.sorted { $0.sequence < $1.sequence }
        return stride(from: 0, to: sorted.count, by: 1000).map { start in
            let chunk = sorted[start..<min(start + 1000, sorted.count)]
            return PostgresStatement("""
                UPDATE payloads p SET fetch_count = p.fetch_count + v.n, fetched_at = greatest(p.fetched_at, v.t)
                FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS v (seq, n, t) WHERE p.seq = v.seq
                """, [.int64Array(chunk.map { Int64(clamping: $0.sequence) }), .int64Array(chunk.map { Int64($0.count) }),
                      .int64Array(chunk.map { Int64(clamping: $0.lastAtMs) })], prepared: true)
        }
    }

    /// A LOGIN's outcome, decided by the rule (`LoginLimitState.after`), written by
    /// compare-and-set: the pair's row, and the address's budget, each only where the
    /// database still holds the values the decision started from (`before`), or inserted
    /// where it holds none. Nothing is computed here: the values are bound. Returns one row:
    /// whether the pair was written (1 or 0), whether the budget was. A part not written
    /// was changed meanwhile by another attempt (at this store or another): its writer
    /// reads it again and has the rule decide again (`PostgresLimitWriter`).
    ///
    /// Why not an upsert of the decided values alone: two stores that read the same row
    /// would both write failures + 1, and one failure would be lost; why not arithmetic in
    /// SQL: then the rule would be written twice. A pair held by the database although the
    /// decision started from none, or the reverse (another store's sweep pruned it), is
    /// left alone too; a budget pruned meanwhile was full, as the decision from it finds it.
    static func loginLimits(_ change: LoginLimitChange) -> PostgresStatement? {
        let writesPair = change.changesPair, writesBudget = change.changesBudget
        guard writesPair || writesBudget else { return nil }
        let before = change.before, after = change.after
        let pairAbsent = before.samePair(as: LoginLimitState())
        return PostgresStatement("""
            WITH pair AS (
                INSERT INTO login_pairs AS lp (user_name, address, failures, blocked_until, last_attempt, trusted_until)
                SELECT $1, $2, $7, $8, $9, $10
                WHERE $15 AND ($17 OR EXISTS (SELECT 1 FROM login_pairs WHERE user_name = $1 AND address = $2))
                ON CONFLICT (user_name, address) DO UPDATE
                SET failures = excluded.failures, blocked_until = excluded.blocked_until, last_attempt = excluded.last_attempt,
                    trusted_until = excluded.trusted_until
                WHERE lp.failures = $3 AND lp.blocked_until = $4 AND lp.last_attempt = $5 AND lp.trusted_until = $6
                RETURNING 1),
            budget AS (
                INSERT INTO login_budgets AS b (address, credit_ms, updated_ms)
                SELECT $2, $13::bigint, $14 WHERE $16
                ON CONFLICT (address) DO UPDATE SET credit_ms = excluded.credit_ms, updated_ms = excluded.updated_ms
                WHERE b.credit_ms IS NOT DISTINCT FROM $11::bigint AND b.updated_ms = $12
                RETURNING 1)
            SELECT (SELECT count(*) FROM pair), (SELECT count(*) FROM budget)
            """, [
            .text(change.key.user), .text(change.key.address),
            .int(before.failures), .uint(before.blockedUntilMs), .uint(before.lastAttemptMs), .uint(before.trustedUntilMs),
            .int(after.failures), .uint(after.blockedUntilMs), .uint(after.lastAttemptMs), .uint(after.trustedUntilMs),
            before.creditMs.map { .int64($0) } ?? .null, .uint(before.creditUpdatedMs),
            after.creditMs.map { .int64($0) } ?? .null, .uint(after.creditUpdatedMs),
            .bool(writesPair), .bool(writesBudget && after.creditMs != nil), .bool(pairAbsent),
        ], prepared: true)
    }

    /// A key's window of refused tokens ([8-9]) as the database held it when it was read,
    /// and as the rule (`FailureWindow.merged`) decided it is to be.
    struct WindowWrite {
        var key: String
        var before: FailureWindow?
        var after: FailureWindow
    }

    /// The windows of refused tokens per address that every store shares, as they are now
    /// (a key at most once per call).
    static func readTokenWindows(_ keys: [String]) -> PostgresStatement {
        PostgresStatement("SELECT address, window_start, failures FROM token_failures WHERE address = ANY($1::text[])",
                          [.textArray(keys)], prepared: true)
    }

    /// The address budgets changed longest ago, the likeliest to have refilled.
    static func oldestBudgets(before nowMs: UInt64, limit: Int) -> PostgresStatement {
        PostgresStatement("SELECT address, credit_ms, updated_ms FROM login_budgets WHERE updated_ms <= $1 ORDER BY updated_ms LIMIT $2",
                          [.uint(nowMs), .int(limit)], prepared: true)
    }

    /// Deletes the budgets the rule found refilled, each only if it is still as read: one
    /// another store charged meanwhile is kept.
    static func deleteBudgets(_ budgets: [(address: String, creditMs: Int64, updatedMs: UInt64)]) -> PostgresStatement {
        PostgresStatement("""
            DELETE FROM login_budgets b USING unnest($1::text[], $2::bigint[], $3::bigint[]) AS v (address, credit_ms, updated_ms)
            WHERE b.address = v.address AND b.credit_ms = v.credit_ms AND b.updated_ms = v.updated_ms
            """, [.textArray(budgets.map(\.address)), .int64Array(budgets.map(\.creditMs)),
                  .int64Array(budgets.map { Int64(clamping: $0.updatedMs) })], prepared: true)
    }

    /// Decided windows of refused tokens, written by compare-and-set as the login limits
    /// are (`loginLimits`): a row updated only if it still holds the window read, one
    /// inserted only where there was none. Each statement returns the addresses it wrote;
    /// the others were changed meanwhile by another store and are decided again.
    static func tokenWindows(_ writes: [WindowWrite]) -> [PostgresStatement] {
        let updates = writes.compactMap { write in write.before.map { (write.key, $0, write.after) } }
        let inserts = writes.filter { $0.before == nil }
        var statements: [PostgresStatement] = []
        if !updates.isEmpty {
            statements.append(PostgresStatement("""
                UPDATE token_failures tf SET window_start = v.start, failures = v.failures
                FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[])
                     AS v (address, read_start, read_failures, start, failures)
                WHERE tf.address = v.address AND tf.window_start = v.read_start AND tf.failures = v.read_failures
                RETURNING tf.address
                """, [.textArray(updates.map(\.0)), .int64Array(updates.map { Int64(clamping: $0.1.startMs) }),
                      .int64Array(updates.map { Int64($0.1.failures) }), .int64Array(updates.map { Int64(clamping: $0.2.startMs) }),
                      .int64Array(updates.map { Int64($0.2.failures) })], prepared: true))
        }
        if !inserts.isEmpty {
            statements.append(PostgresStatement("""
                INSERT INTO token_failures (address, window_start, failures)
                SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[]) ON CONFLICT (address) DO NOTHING
                RETURNING address
                """, [.textArray(inserts.map(\.key)), .int64Array(inserts.map { Int64(clamping: $0.after.startMs) }),
                      .int64Array(inserts.map { Int64($0.after.failures) })], prepared: true))
        }
        return statements
    }

    // MARK: the sweep

    /// The listed audiences of a group's SENDs ([4.9-4]), in the transaction of their
    /// payloads: one element per (payload, device), joined to the payloads that went in.
    static func insertAudiences(_ rows: [NewPayload]) -> PostgresStatement {
        let pairs = rows.flatMap { row in row.audience.listedDevices.map { (row.id.bytes, $0) } }
        return PostgresStatement("""
            INSERT INTO audiences (seq, device)
            SELECT p.seq, v.device FROM unnest($1::bytea[], $2::text[]) AS v (id, device) JOIN payloads p ON p.id = v.id
            ON CONFLICT DO NOTHING
            """, [.bytesArray(pairs.map(\.0)), .textArray(pairs.map(\.1))], prepared: true)
    }

    /// Frees the keys a group's SENDs take from the rows of their earlier uses, which the
    /// requests' reads found forgotten (`NewPayload.keyTakenFromExpiry`), so the insert that
    /// follows can take them; a row holding a key with another expiry (another store's SEND
    /// took it meanwhile) keeps it, and that SEND's insert fails the unique index.
    static func freeForgottenKeys(_ keys: [(key: IdempotencyKey, expiry: UInt64)]) -> PostgresStatement {
        PostgresStatement("""
            UPDATE payloads p SET key_scope = NULL, idem_key = NULL, request_hash = NULL, key_expires_at = NULL
            FROM unnest($1::text[], $2::text[], $3::bigint[]) AS v (scope, key, expiry)
            WHERE p.key_scope = v.scope AND p.idem_key = v.key AND p.key_expires_at = v.expiry
            """, [.textArray(keys.map(\.key.scope)), .textArray(keys.map(\.key.key)),
                  .int64Array(keys.map { Int64(clamping: $0.expiry) })], prepared: true)
    }

    /// Gateways' answers to outbox pushes ([4.12-2]), on their payloads' rows.
    static func pushesHanded(_ handed: [HandedPush]) -> PostgresStatement {
        PostgresStatement("""
            UPDATE payloads o SET outbox = \(OutboxState.handed.rawValue), written = v.written, queued = v.queued, handed_at = v.handed_at
            FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[]) AS v (seq, written, queued, handed_at)
            WHERE o.seq = v.seq AND o.outbox = \(OutboxState.waiting.rawValue)
            """, [
            .int64Array(handed.map { Int64(clamping: $0.sequence) }), .int64Array(handed.map { Int64($0.ack.written) }),
            .int64Array(handed.map { Int64($0.ack.queued) }), .int64Array(handed.map { Int64(clamping: $0.handedAt) }),
        ], prepared: true)
    }

    /// Waiting pushes after `cursor` that this store loop owns or whose lease is over,
    /// claimed for it until `leaseUntil` ([4.17-4]); rows another store is claiming right
    /// now are skipped, not waited for. Those whose payload is no longer live stay behind.
    static func claimPushes(owner: String, after cursor: UInt64, limit: Int, nowMs: UInt64, leaseUntil: UInt64) -> PostgresStatement {
        PostgresStatement("""
            WITH claimed AS (
                UPDATE payloads o SET outbox_owner = $1, lease_until = $2
                WHERE o.seq IN (SELECT seq FROM payloads WHERE outbox = \(OutboxState.waiting.rawValue) AND seq > $3
                                  AND (outbox_owner = $1 OR lease_until <= $4)
                                ORDER BY seq LIMIT $5 FOR UPDATE SKIP LOCKED)
                RETURNING o.seq, o.push, o.expires_at, o.created_at, o.life)
            SELECT seq, push, expires_at, created_at FROM claimed
            WHERE life = \(PayloadLife.live.rawValue) AND expires_at > $4
            ORDER BY seq
            """, [.text(owner), .uint(leaseUntil), .uint(cursor), .uint(nowMs), .int(limit)], prepared: true)
    }

    /// Rows per sweep statement, so that a sweep never holds many row locks for long.
    static let sweepBatch = 5000

    /// Payloads past their TTL become expired and lose their bodies. Rows another store is
    /// sweeping (or writing) right now are skipped, not waited for: several stores sweep
    /// the same table without queueing behind each other.
    static func expire(nowMs: UInt64) -> PostgresStatement {
        PostgresStatement("""
            UPDATE payloads SET life = \(PayloadLife.expired.rawValue), body = NULL, key_id = NULL
            WHERE seq IN (SELECT seq FROM payloads WHERE expires_at <= $1 AND life = \(PayloadLife.live.rawValue) ORDER BY expires_at
                          LIMIT \(sweepBatch) FOR UPDATE SKIP LOCKED)
            """, [.uint(nowMs)])
    }

    /// Rows expired long enough ago that FETCH need no longer say GONE rather than
    /// NOT_FOUND are deleted (their receipts with them).
    static func forget(horizonMs: UInt64) -> PostgresStatement {
        PostgresStatement("""
            DELETE FROM payloads WHERE seq IN (SELECT seq FROM payloads WHERE expires_at <= $1 ORDER BY expires_at
                                               LIMIT \(sweepBatch) FOR UPDATE SKIP LOCKED)
            """, [.uint(horizonMs)])
    }

    /// Revoked registrations that have expired ([4.16-7]), pairs of the login limits that
    /// no longer hold anyone back ([8-10]: not held back, idle for an hour, not trusted), and
    /// windows of refused tokens that have ended ([8-9]). Budgets that have refilled are
    /// decided by the rule, row by row (`PostgresLimitWriter.pruneBudgets`).
    static func pruneOthers(nowMs: UInt64, tokenWindowMs: UInt64) -> [PostgresStatement] {
        return [
            PostgresStatement("DELETE FROM registrations WHERE state = \(RegistryEntry.State.revoked.sql) AND expires_at <= $1",
                              [.uint(nowMs)]),
            // `LoginLimitState.pairIdle`, over bound times; a pair still trusted is kept.
            PostgresStatement("""
                DELETE FROM login_pairs WHERE blocked_until <= $1 AND trusted_until <= $1 AND last_attempt <= $2
                """, [.uint(nowMs), .uint(LoginThrottle.idleSince(nowMs: nowMs))]),
            PostgresStatement("DELETE FROM token_failures WHERE window_start < $1",
                              [.uint(FailureWindow.earliestOpenStart(nowMs: nowMs, windowMs: tokenWindowMs))]),
        ]
    }
}
