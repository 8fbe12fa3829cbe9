import Foundation
import PushPostgres
@testable import PushStore
@testable import PushStoreLogic
@testable import PushStorePostgres
@testable import PushStoreSQLite
import PushTestSupport
import PushWire
import Testing

/// What a build before SEND was one row left (SQLite version 7, PostgreSQL version 8): a
/// STORE, a SEND whose push waits with its key, a SEND whose push a gateway answered, and
/// a key whose payload is gone. After the upgrade every reader of the outbox and the keys
/// answers as before, from the payloads' rows, and the old tables are gone.
enum SendRowFixture {
    static let waitingID = PayloadID(high: 1, low: 2)
    static let handedID = PayloadID(high: 3, low: 4)
    static let storedID = PayloadID(high: 5, low: 6)
    static let orphanID = PayloadID(high: 7, low: 8)
    static let key = IdempotencyKey(scope: IdempotencyKey.providerScope, key: "order-1")
    static let orphanKey = IdempotencyKey(scope: IdempotencyKey.providerScope, key: "order-0")
    static let far: UInt64 = 9_999_999_999_999
    static let push = Push(target: .user("alice"), id: waitingID.bytes, alert: true, priority: 5, collapseKey: nil, ttlSeconds: 60,
                           user: "alice", once: true)
    static let handedPush = Push(target: .user("alice"), id: handedID.bytes, alert: false, priority: 5, collapseKey: nil, ttlSeconds: 60,
                                 user: "alice", once: true)
    static let hash: [UInt8] = Array(repeating: 9, count: 32)
    /// When the key is forgotten: the waiting SEND's, well in the future; the orphan's, past.
    static let keyExpiry: UInt64 = 5_000_000_000_000
}

extension SchemaMigrationTests {
    @Test("[4.17-4] [4.17-5] [4.12-2] version 7 to 8: a SEND's push and key move into its payload's row, the old tables go")
    func movesSendsIntoPayloads() throws {
        let scratch = try ScratchDatabase()
        let old = try SQLiteConnection(path: scratch.path)
        // A version-7 file, as that build's `SQLiteSchema.fresh` made it.
        try old.execute([SQLiteSchema.usersTable("users"), SQLiteSchema.payloadsTable("payloads"), SQLiteSchema.senderColumn,
                         SQLiteSchema.receiptsTable, SQLiteSchema.metaAndTriggers, SQLiteSchema.indexes, RegistryTable.schema,
                         SQLiteSchema.pushesTable, SQLiteSchema.idempotencyTable, APITokenTable.schema, SQLiteSchema.audiencesTable]
            .joined(separator: ";\n"))
        typealias F = SendRowFixture
        try old.execute("""
            INSERT INTO users (id, name, password_hash, created_at) VALUES (42, 'alice', 'h', 1000);
            INSERT INTO payloads (seq, id_high, id_low, user_id, key_id, body, created_at, expires_at, read_limit, sender)
                VALUES (1, \(F.waitingID.high), \(F.waitingID.low), 42, NULL, NULL, 10, \(F.far), 1, 'provider-key'),
                       (2, \(F.handedID.high), \(F.handedID.low), 42, NULL, NULL, 20, \(F.far), 1, 'provider-key'),
                       (3, \(F.storedID.high), \(F.storedID.low), 42, NULL, NULL, 30, \(F.far), 1, 'provider-key');
            PRAGMA user_version = 7;
            """)
        try old.run("INSERT INTO pushes (seq, push) VALUES (1, ?)", [.blob(OutboxEntry.encode(F.push))])
        try old.run("INSERT INTO pushes (seq, push, state, written, queued, handed_at) VALUES (2, ?, \(OutboxState.handed.rawValue), 2, 1, 25)",
                     [.blob(OutboxEntry.encode(F.handedPush))])
        for (key, id, expiry) in [(F.key, F.waitingID, F.keyExpiry), (F.orphanKey, F.orphanID, UInt64(40))] {
            try old.run("INSERT INTO idempotency_keys (scope, key, request_hash, id, payload_expires_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
                        [.text(key.scope), .text(key.key), .blob(F.hash), .blob(id.bytes), .uint(F.far), .uint(expiry)])
        }
        old.close()

        let writer = try SQLitePayloadWriter(path: scratch.path)
        #expect(try scratch.integer("PRAGMA user_version") == SQLiteSchema.currentVersion)
        #expect(try scratch.integer("SELECT count(*) FROM sqlite_master WHERE name IN ('pushes', 'idempotency_keys')") == 0)
        let reader = try SQLitePayloadReader(path: scratch.path)
        #expect(try reader.pushOutcome(sequence: 1) == .waiting)
        #expect(try reader.pushOutcome(sequence: 2) == .handed(PushAck(written: 2, queued: 1)))
        #expect(try reader.pushOutcome(sequence: 3) == PushOutcome.none)
        #expect(try reader.waitingPushes(after: 0, limit: 10, nowMs: 100)
            == [OutboxEntry(sequence: 1, push: F.push, expiresAt: F.far, createdAt: 10)])
        #expect(try reader.idempotencyRecord(F.key)
            == IdempotencyRecord(key: F.key, requestHash: F.hash, id: F.waitingID, payloadExpiresAt: F.far, expiresAt: F.keyExpiry))
        #expect(try reader.idempotencyRecord(F.orphanKey) == nil, "a key whose payload is gone goes with it")

        // The handed record and the read-out receipt are updates of the same rows.
        #expect(try writer.commit([.pushesHanded([HandedPush(sequence: 1, ack: PushAck(written: 1, queued: 0), handedAt: 50)])]) == [.ok])
        #expect(try reader.pushOutcome(sequence: 1) == .handed(PushAck(written: 1, queued: 0)))
        #expect(try reader.waitingPushes(after: 0, limit: 10, nowMs: 100).isEmpty)
        // The key holds until it expires; then a new SEND whose read found it forgotten takes it from the old row.
        var again = NewPayload(id: PayloadID(high: 9, low: 9), user: "alice", body: [1], createdAt: 100, expiresAt: F.far, readLimit: 1,
                               push: F.push, sender: "provider-key")
        again.idempotency = IdempotencyRecord(key: F.key, requestHash: F.hash, id: again.id, payloadExpiresAt: F.far,
                                              expiresAt: F.keyExpiry + 100)
        #expect(try writer.commit([.store(again)]) == [.failed(.busy)])
        again.keyTakenFromExpiry = F.keyExpiry - 1
        #expect(try writer.commit([.store(again)]) == [.failed(.busy)], "not the use the read found forgotten")
        again.keyTakenFromExpiry = F.keyExpiry
        guard case .stored(let seq, _) = try writer.commit([.store(again)])[0] else {
            Issue.record("the expired key was not taken")
            return
        }
        #expect(try reader.idempotencyRecord(F.key)?.id == again.id)
        #expect(try reader.waitingPushes(after: 0, limit: 10, nowMs: 100).map(\.sequence) == [seq])
    }
}

@Suite("PostgreSQL: a SEND is one row", .ownThread, .serialized, .enabled(if: PostgresCluster.testsEnabled))
struct PostgresSendRowTests {
    @Test("[4.17-4] [4.17-5] [4.12-2] version 8 to 9: pushes and keys move into their payloads' rows, the claim and the reads find them")
    func movesSendsIntoPayloads() async throws {
        try await onOwnThread {
            typealias F = SendRowFixture
            let url = try PostgresCluster.shared().createDatabase()
            let old = try PostgresBlockingConnection(url)
            defer { old.close() }
            try old.execute("CREATE TABLE schema_version (version bigint PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")
            for (version, sql) in PostgresSchema.migrations where version <= 8 {
                try old.execute(sql)
                _ = try old.query("INSERT INTO schema_version (version) VALUES ($1)", [.int64(version)])
            }
            _ = try old.query("INSERT INTO users (id, name, password_hash, created_at) VALUES (42, 'alice', 'h', 1000)")
            for (id, created) in [(F.waitingID, 10), (F.handedID, 20), (F.storedID, 30)] {
                _ = try old.query("""
                    INSERT INTO payloads (id, user_id, key_id, body, created_at, expires_at, read_limit, sender)
                    VALUES ($1, 42, NULL, NULL, $2, $3, 1, 'provider-key')
                    """, [.bytes(id.bytes), .int64(Int64(created)), .uint(F.far)])
            }
            _ = try old.query("""
                INSERT INTO pushes (seq, push, owner, lease_until) SELECT seq, $2, 'gone-store', 0 FROM payloads WHERE id = $1
                """, [.bytes(F.waitingID.bytes), .bytes(OutboxEntry.encode(F.push))])
            _ = try old.query("""
                INSERT INTO pushes (seq, push, state, written, queued, handed_at, owner, lease_until)
                SELECT seq, $2, \(OutboxState.handed.rawValue), 2, 1, 25, 'gone-store', 0 FROM payloads WHERE id = $1
                """, [.bytes(F.handedID.bytes), .bytes(OutboxEntry.encode(F.handedPush))])
            for (key, id, expiry) in [(F.key, F.waitingID, F.keyExpiry), (F.orphanKey, F.orphanID, UInt64(40))] {
                _ = try old.query("""
                    INSERT INTO idempotency_keys (scope, key, request_hash, id, payload_expires_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)
                    """, [.text(key.scope), .text(key.key), .bytes(F.hash), .bytes(id.bytes), .uint(F.far), .uint(expiry)])
            }
            _ = try PostgresAdministration(url: url)
            #expect(try PostgresSchema.version(on: old) == PostgresSchema.currentVersion)
            #expect(try old.query("SELECT count(*) FROM pg_tables WHERE tablename IN ('pushes', 'idempotency_keys')").int64(0, 0) == 0)

            // STATUS's push outcome ([4.12-2]) and the key's record ([4.17-5]), as a request reads them.
            for (id, outcome) in [(F.waitingID, PushOutcome.waiting), (F.handedID, .handed(PushAck(written: 2, queued: 1))),
                                  (F.storedID, PushOutcome.none)] {
                let reads = StoreReads(payload: id, pushOutcome: true)
                let statement = try #require(PostgresReadStatement(reads))
                let found = try statement.decode(try old.query(statement.sql, statement.parameters), reads: reads) { sealed, _, _, _ in sealed }
                #expect(found.payload?.push == outcome, "\(id)")
            }
            for (key, expected) in [(F.key, IdempotencyRecord(key: F.key, requestHash: F.hash, id: F.waitingID, payloadExpiresAt: F.far,
                                                               expiresAt: F.keyExpiry)), (F.orphanKey, nil)] {
                let reads = StoreReads(idempotency: key)
                let statement = try #require(PostgresReadStatement(reads))
                let found = try statement.decode(try old.query(statement.sql, statement.parameters), reads: reads) { sealed, _, _, _ in sealed }
                #expect(found.idempotency == expected, "\(key.key)")
            }
            // The outbox claim: the waiting push whose owner's lease is over, taken by another store.
            let claim = PostgresWriteStatements.claimPushes(owner: "next-store", after: 0, limit: 10, nowMs: 100, leaseUntil: 30_100)
            let claimed = try old.query(claim.sql, claim.parameters)
            #expect(claimed.rows.count == 1)
            #expect(try OutboxEntry.decode(claimed.bytes(0, 1)) == F.push)
            #expect(try old.query("SELECT outbox_owner FROM payloads WHERE id = $1", [.bytes(F.waitingID.bytes)]).text(0, 0) == "next-store")
            // The gateway's answer is an update of the payload's row.
            let seq = try old.query("SELECT seq FROM payloads WHERE id = $1", [.bytes(F.waitingID.bytes)]).uint(0, 0)
            let handed = PostgresWriteStatements.pushesHanded([HandedPush(sequence: seq, ack: PushAck(written: 1, queued: 0), handedAt: 50)])
            _ = try old.query(handed.sql, handed.parameters)
            #expect(try old.query(claim.sql, claim.parameters).rows.isEmpty)
            // A key is freed from the row of the use the SEND's read found forgotten, and from no other.
            let keep = PostgresWriteStatements.freeForgottenKeys([(F.key, F.keyExpiry - 1)])
            #expect(try old.query(keep.sql, keep.parameters).affectedRows == 0)
            let free = PostgresWriteStatements.freeForgottenKeys([(F.key, F.keyExpiry)])
            #expect(try old.query(free.sql, free.parameters).affectedRows == 1)
        }
    }
}

@Suite("SQLite: one write per message", .ownThread)
struct SQLiteSendRowTests {
    /// Rows in each table but `payloads`, `users` and `store_meta`.
    private func otherRows(_ scratch: ScratchDatabase) throws -> Int64 {
        try ["receipts", "audiences", "registrations", "api_tokens"].reduce(0) { sum, table in
            sum + (try scratch.integer("SELECT count(*) FROM \(table)") ?? 0)
        }
    }

    @Test("[4.17-1] [4.17-5] a keyed SEND is one row; [4.10-1] [4.10-2] the receipt that reads it out is an update of it, no receipt row, and a repeat changes nothing")
    func sendIsOneRow() throws {
        let scratch = try ScratchDatabase("send-row")
        let admin = try UserAdministration(databasePath: scratch.path)
        let alice = try #require(try admin.add("alice", passwordHash: "h", nowMs: 5))
        let writer = try SQLitePayloadWriter(path: scratch.path)
        let reader = try SQLitePayloadReader(path: scratch.path)
        var send = NewPayload(id: PayloadID(high: 1, low: 1), user: "alice", body: [1, 2], createdAt: 10, expiresAt: SendRowFixture.far,
                              readLimit: 1, push: SendRowFixture.push, sender: "provider-key")
        send.idempotency = IdempotencyRecord(key: SendRowFixture.key, requestHash: SendRowFixture.hash, id: send.id,
                                             payloadExpiresAt: send.expiresAt, expiresAt: 10 + IdempotencyRecord.lifetimeMs)
        guard case .stored(let seq, _) = try writer.commit([.store(send)])[0] else {
            Issue.record("not stored")
            return
        }
        #expect(try scratch.integer("SELECT count(*) FROM payloads") == 1)
        #expect(try otherRows(scratch) == 0, "the push and the key are the payload's row")
        #expect(try reader.idempotencyRecord(SendRowFixture.key)?.id == send.id)
        #expect(try reader.waitingPushes(after: 0, limit: 10, nowMs: 20).map(\.sequence) == [seq])

        #expect(try writer.commit([.ack(sequence: seq, userID: alice.id, deviceID: "phone")]) == [.ok])
        #expect(try otherRows(scratch) == 0, "read out: no receipt row")
        let read = try #require(try reader.payload(sequence: seq))
        #expect(read.life == .readOut && read.readCount == 1 && read.body.isEmpty)
        #expect(try reader.unread(userID: alice.id, UnreadQuery(deviceID: "phone", cursor: 0, limit: 10, nowMs: 20)).ids.isEmpty)
        #expect(try reader.waitingPushes(after: 0, limit: 10, nowMs: 20).isEmpty, "a push whose payload is gone is not sent")
        for device in ["phone", "tablet"] {
            #expect(try writer.commit([.ack(sequence: seq, userID: alice.id, deviceID: device)]) == [.ok], "\(device)")
        }
        #expect(try otherRows(scratch) == 0)
        #expect(try reader.payload(sequence: seq)?.readCount == 1)
    }
}
