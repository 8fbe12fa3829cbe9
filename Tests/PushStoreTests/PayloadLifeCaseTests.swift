import Foundation
import PushPostgres
@testable import PushStore
@testable import PushStoreLogic
@testable import PushStorePostgres
@testable import PushStoreSQLite
import PushTestSupport
import PushWire
import Testing

/// One change to a stored payload's life: a read receipt ([4.10-1], [4.10-2]), a RECALL
/// ([4.11-1]) or a sweep past its TTL, from a given state; the life, read count and body
/// afterwards. The same table runs against the rule (`PayloadLife`), the SQLite writer and
/// the PostgreSQL statements of a group commit and a sweep, which bind what the rule decided.
struct PayloadLifeCase: Sendable, CustomTestStringConvertible {
    enum Change: Sendable {
        /// From a device that has (`repeated`) or has not acknowledged the payload before.
        case receipt(repeated: Bool)
        case recall
        case sweep(nowMs: UInt64)
    }

    var name: String
    var life = PayloadLife.live
    var readLimit: Int64 = 0
    var readCount: Int64 = 0
    var expiresAt = PayloadLifeCase.t + 60_000
    var change: Change
    var lifeAfter: PayloadLife
    var readCountAfter: Int64
    var erased: Bool

    var testDescription: String { name }
    static let t: UInt64 = 1_700_000_000_000
}

let payloadLifeCases: [PayloadLifeCase] = {
    let t = PayloadLifeCase.t
    return [
        PayloadLifeCase(name: "[4.10-1] a receipt below the read limit counts and leaves the payload readable", readLimit: 3, readCount: 1,
                        change: .receipt(repeated: false), lifeAfter: .live, readCountAfter: 2, erased: false),
        PayloadLifeCase(name: "[4.10-1] the receipt that reaches the read limit reads the payload out", readLimit: 3, readCount: 2,
                        change: .receipt(repeated: false), lifeAfter: .readOut, readCountAfter: 3, erased: true),
        PayloadLifeCase(name: "[4.10-1] a read limit of 1: the first receipt reads it out", readLimit: 1,
                        change: .receipt(repeated: false), lifeAfter: .readOut, readCountAfter: 1, erased: true),
        PayloadLifeCase(name: "[4.10-1] without a read limit receipts only count", readCount: 1_000,
                        change: .receipt(repeated: false), lifeAfter: .live, readCountAfter: 1_001, erased: false),
        PayloadLifeCase(name: "[4.10-2] a device's second receipt counts for nothing", readLimit: 2, readCount: 1,
                        change: .receipt(repeated: true), lifeAfter: .live, readCountAfter: 1, erased: false),
        PayloadLifeCase(name: "[4.10-2] a receipt for a recalled payload changes nothing", life: .recalled, readLimit: 2,
                        readCount: 1, change: .receipt(repeated: false), lifeAfter: .recalled, readCountAfter: 1, erased: true),
        PayloadLifeCase(name: "[4.10-2] a receipt for an expired payload changes nothing", life: .expired,
                        change: .receipt(repeated: false), lifeAfter: .expired, readCountAfter: 0, erased: true),
        PayloadLifeCase(name: "[4.10-2] a receipt for a payload read out changes nothing", life: .readOut, readLimit: 1, readCount: 1,
                        change: .receipt(repeated: false), lifeAfter: .readOut, readCountAfter: 1, erased: true),
        PayloadLifeCase(name: "[4.11-1] a RECALL makes a live payload gone", readLimit: 2, readCount: 1,
                        change: .recall, lifeAfter: .recalled, readCountAfter: 1, erased: true),
        PayloadLifeCase(name: "[4.11-2] a RECALL of a payload read out makes it recalled", life: .readOut, readLimit: 1, readCount: 1,
                        change: .recall, lifeAfter: .recalled, readCountAfter: 1, erased: true),
        PayloadLifeCase(name: "[4.7-4] a sweep at the TTL expires a live payload", expiresAt: t,
                        change: .sweep(nowMs: t), lifeAfter: .expired, readCountAfter: 0, erased: true),
        PayloadLifeCase(name: "[4.7-4] a sweep before the TTL leaves it", expiresAt: t + 1,
                        change: .sweep(nowMs: t), lifeAfter: .live, readCountAfter: 0, erased: false),
        PayloadLifeCase(name: "[4.7-4] a sweep leaves a payload read out as it went", life: .readOut, readLimit: 1, readCount: 1,
                        expiresAt: t - 1, change: .sweep(nowMs: t), lifeAfter: .readOut, readCountAfter: 1, erased: true),
    ]
}()

/// What a backend holds of a payload afterwards.
private struct PayloadLifeState: Equatable {
    var life: PayloadLife
    var readCount: Int64
    var erased: Bool

    init(_ example: PayloadLifeCase) {
        life = example.lifeAfter
        readCount = example.readCountAfter
        erased = example.erased
    }

    init(life: PayloadLife, readCount: Int64, erased: Bool) {
        self.life = life
        self.readCount = readCount
        self.erased = erased
    }
}

@Suite("Payload life: one case table for the rule and both backends", .ownThread, .serialized)
struct PayloadLifeCaseTests {
    @Test("the rule (PayloadLife)", arguments: payloadLifeCases)
    func rule(_ example: PayloadLifeCase) {
        var state = PayloadLifeState(life: example.life, readCount: example.readCount, erased: example.life != .live)
        switch example.change {
        case .receipt(let repeated):
            let row = ReceiptRow(owner: 1, admitsDevice: true, life: example.life, readLimit: example.readLimit,
                                 readCount: example.readCount, acknowledged: repeated)
            switch PayloadLife.receipt(on: row, from: 1) {
            case .refused, .unchanged: break
            case .counted(let count): state.readCount = count
            case .readOut(let count):
                state = PayloadLifeState(life: .readOut, readCount: count, erased: true)
            }
        case .recall:
            state = PayloadLifeState(life: .recalled, readCount: example.readCount, erased: true)
        case .sweep(let nowMs):
            state.life = example.life.afterSweep(expiresAt: example.expiresAt, nowMs: nowMs)
            state.erased = state.erased || state.life != example.life
        }
        #expect(state == PayloadLifeState(example))
    }

    @Test("the SQLite writer", arguments: payloadLifeCases)
    func sqlite(_ example: PayloadLifeCase) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("payload-life-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent(SQLitePayloadDatabase.fileName).path
        let writer = try SQLitePayloadWriter(path: path)
        let reader = try SQLitePayloadReader(path: path)
        #expect(try writer.addUser("alice", passwordHash: "x", nowMs: 1))
        let alice = try #require(try reader.user(named: "alice")).id
        let new = NewPayload(id: .random(), user: "alice", body: [1, 2, 3], createdAt: 1, expiresAt: example.expiresAt, readLimit: 0, sender: "provider-key")
        guard case .stored(let seq, _) = try writer.commit([.store(new)])[0] else { throw StoreBackendError("not stored") }
        let connection = try SQLiteConnection(path: path)
        try connection.run("UPDATE payloads SET life = ?, read_limit = ?, read_count = ? WHERE seq = ?",
                           [.int(example.life.rawValue), .int(example.readLimit), .int(example.readCount), .uint(seq)])
        if example.life != .live { try connection.run("UPDATE payloads SET body = NULL, key_id = NULL WHERE seq = ?", [.uint(seq)]) }
        switch example.change {
        case .receipt(let repeated):
            if repeated { try connection.run("INSERT INTO receipts (seq, device) VALUES (?, 'phone')", [.uint(seq)]) }
            #expect(try writer.commit([.ack(sequence: seq, userID: alice, deviceID: "phone")]) == [.ok])
        case .recall: #expect(try writer.commit([.recall(sequence: seq)]) == [.ok])
        case .sweep(let nowMs): _ = try writer.sweepExpired(nowMs: nowMs)
        }
        let after = try #require(try reader.payload(sequence: seq))
        #expect(PayloadLifeState(life: after.life, readCount: Int64(after.readCount), erased: after.body.isEmpty) == PayloadLifeState(example))
    }

    @Test("the PostgreSQL statements", .enabled(if: PostgresCluster.testsEnabled))
    func postgres() throws {
        let database = try PostgresDeployment(users: false)
        try database.addUser("alice", password: "alice-pw")
        let alice = try database.sql("SELECT id FROM users WHERE name = 'alice'").uint(0, 0)
        for example in payloadLifeCases {
            let seq = try database.sql("""
                INSERT INTO payloads (id, user_id, key_id, body, created_at, expires_at, read_limit, read_count, life)
                VALUES ($1, $2, 1, $3, 1, $4, $5, $6, $7) RETURNING seq
                """, [.bytes(PayloadID.random().bytes), .uint(alice), .bytes([1, 2, 3]), .uint(example.expiresAt),
                      .int64(example.readLimit), .int64(example.readCount), .int64(example.life.rawValue)]).uint(0, 0)
            if example.life != .live { _ = try database.sql("UPDATE payloads SET body = NULL, key_id = NULL WHERE seq = $1", [.uint(seq)]) }
            let statement: PostgresStatement
            switch example.change {
            case .receipt(let repeated):
                if repeated { _ = try database.sql("INSERT INTO receipts (seq, device) VALUES ($1, 'phone')", [.uint(seq)]) }
                // The row as a group commit reads it, the receipt decided in Swift, the decision bound.
                let read = PostgresWriteStatements.receiptRows([(seq, "phone")])
                let row = try #require(try PostgresWriteStatements.decodeReceiptRows(try database.sql(read.sql, read.parameters))[1] ?? nil)
                let decided = PostgresGroupCommit.decideReceipts([.init(sequence: seq, userID: alice, deviceID: "phone", row: row)])
                statement = PostgresWriteStatements.receipts(decided.writes)
            case .recall: statement = PostgresWriteStatements.recalls([seq])
            case .sweep(let nowMs): statement = PostgresWriteStatements.expire(nowMs: nowMs)
            }
            _ = try database.sql(statement.sql, statement.parameters)
            let row = try database.sql("SELECT life, read_count, body IS NULL FROM payloads WHERE seq = $1", [.uint(seq)])
            let after = PayloadLifeState(life: PayloadLife(rawValue: try row.int64(0, 0)) ?? .expired, readCount: try row.int64(0, 1),
                                         erased: try row.bool(0, 2))
            #expect(after == PayloadLifeState(example), "\(example.name)")
            _ = try database.sql("DELETE FROM payloads")
        }
    }
}
