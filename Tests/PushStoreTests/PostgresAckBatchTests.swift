import Foundation
import PushClient
import PushPostgres
@testable import PushStore
@testable import PushStoreLogic
@testable import PushStorePostgres
import PushTestSupport
import PushWire
import Testing

/// A group commit's ACKs as one statement over arrays, and its RECALLs as another
/// (`PostgresWriteStatements.receipts`, `.recalls`), against a real database: the receipts
/// decided in Swift (`PostgresGroupCommit.decideReceipts`, `PayloadLife.receipt`) from the
/// rows as read, each ACK its own outcome, with the semantics of one ACK at a time.
@Suite("Coalesced ACKs and RECALLs on PostgreSQL", .ownThread, .serialized, .enabled(if: PostgresCluster.testsEnabled))
struct PostgresAckBatchTests {
    /// A payload row for `user` with `readLimit`; its seq.
    private func payload(_ database: PostgresDeployment, user: UInt64, readLimit: Int = 0) throws -> UInt64 {
        let id = PayloadID.random()
        return try database.sql("""
            INSERT INTO payloads (id, user_id, key_id, body, created_at, expires_at, read_limit)
            VALUES ($1, $2, 1, $3, 10, 99999999999999, $4) RETURNING seq
            """, [.bytes(id.bytes), .uint(user), .bytes([1, 2, 3]), .int(readLimit)]).uint(0, 0)
    }

    /// Reads the ACKs' rows, decides their receipts and writes them as one statement, as a
    /// group commit does; each ACK's status (OK, NOT_FOUND, FORBIDDEN), in order.
    private func ack(_ database: PostgresDeployment, _ acks: [(UInt64, UInt64, String)]) throws -> [Status] {
        let read = PostgresWriteStatements.receiptRows(acks.map { ($0.0, $0.2) })
        let rows = try PostgresWriteStatements.decodeReceiptRows(try database.sql(read.sql, read.parameters))
        var statuses = [Status](repeating: .notFound, count: acks.count)
        var found: [PostgresGroupCommit.Receipt] = []
        var indexes: [Int] = []
        for (index, ack) in acks.enumerated() {
            guard let row = rows[index + 1] ?? nil else { continue }
            found.append(.init(sequence: ack.0, userID: ack.1, deviceID: ack.2, row: row))
            indexes.append(index)
        }
        let decided = PostgresGroupCommit.decideReceipts(found)
        for (index, decision) in zip(indexes, decided.decisions) {
            if case .refused(let status) = decision.write { statuses[index] = status } else { statuses[index] = .ok }
        }
        guard !decided.writes.isEmpty else { return statuses }
        let write = PostgresWriteStatements.receipts(decided.writes)
        let written = try database.sql(write.sql, write.parameters)
        #expect(written.rows.count == decided.writes.count, "every payload written: none changed meanwhile")
        return statuses
    }

    /// read_count, life, body IS NULL, receipts.
    private func state(_ database: PostgresDeployment, _ seq: UInt64) throws -> [PostgresValue] {
        try database.sql("""
            SELECT read_count, life, body IS NULL, (SELECT count(*) FROM receipts r WHERE r.seq = p.seq) FROM payloads p WHERE seq = $1
            """, [.uint(seq)]).rows[0]
    }

    @Test("[4.10-1] [4.10-2] many ACKs in one statement: each its own outcome, NOT_FOUND, FORBIDDEN and OK mixed")
    func mixedOutcomes() throws {
        let database = try PostgresDeployment()
        let alice = try database.sql("SELECT id FROM users WHERE name = 'alice'").uint(0, 0)
        let bob = try database.sql("SELECT id FROM users WHERE name = 'bob'").uint(0, 0)
        let mine = try (0..<50).map { _ in try payload(database, user: alice, readLimit: 2) }
        let bobs = try payload(database, user: bob)
        let missing = try payload(database, user: alice)
        _ = try database.sql("DELETE FROM payloads WHERE seq = $1", [.uint(missing)])
        var acks: [(UInt64, UInt64, String)] = []
        var expected: [Status] = []
        for (index, seq) in mine.enumerated() {
            acks.append((seq, alice, "phone"))
            expected.append(.ok)
            if index % 10 == 0 {
                acks.append((bobs, alice, "phone"))
                expected.append(.forbidden)
                acks.append((missing, alice, "phone"))
                expected.append(.notFound)
            }
        }
        #expect(try ack(database, acks) == expected)
        for seq in mine { #expect(try state(database, seq) == [.int64(1), .int32(1), .bool(false), .int64(1)]) }
        #expect(try state(database, bobs) == [.int64(0), .int32(1), .bool(false), .int64(0)], "FORBIDDEN changes nothing")
    }

    @Test("[4.10-2] the same (payload, device) several times in one statement, and again later, counts once")
    func duplicates() throws {
        let database = try PostgresDeployment()
        let alice = try database.sql("SELECT id FROM users WHERE name = 'alice'").uint(0, 0)
        let seq = try payload(database, user: alice, readLimit: 3)
        let other = try payload(database, user: alice, readLimit: 3)
        let acks = [(seq, alice, "phone"), (other, alice, "phone"), (seq, alice, "phone"), (seq, alice, "tablet"), (seq, alice, "phone")]
        #expect(try ack(database, acks) == [.ok, .ok, .ok, .ok, .ok])
        let after = try state(database, seq); #expect(after == [.int64(2), .int32(1), .bool(false), .int64(2)], "\(after)")
        #expect(try state(database, other) == [.int64(1), .int32(1), .bool(false), .int64(1)])
        #expect(try ack(database, [(seq, alice, "tablet"), (seq, alice, "phone")]) == [.ok, .ok])
        #expect(try state(database, seq) == [.int64(2), .int32(1), .bool(false), .int64(2)])
    }

    @Test("[4.10-1] [4.10-2] read limit 1 reached by two devices in one statement: gone and erased with no receipt row, both OK, and OK again after")
    func readLimitTwiceInOneGroup() throws {
        let database = try PostgresDeployment()
        let alice = try database.sql("SELECT id FROM users WHERE name = 'alice'").uint(0, 0)
        let seq = try payload(database, user: alice, readLimit: 1)
        #expect(try ack(database, [(seq, alice, "phone"), (seq, alice, "tablet")]) == [.ok, .ok])
        #expect(try state(database, seq) == [.int64(1), .int32(Int32(PayloadLife.readOut.rawValue)), .bool(true), .int64(0)])
        #expect(try database.sql("SELECT key_id IS NULL FROM payloads WHERE seq = $1", [.uint(seq)]).rows[0] == [.bool(true)])
        // A gone payload can still be acknowledged, by a device seen or a new one, and nothing is written.
        #expect(try ack(database, [(seq, alice, "phone"), (seq, alice, "laptop")]) == [.ok, .ok])
        #expect(try state(database, seq) == [.int64(1), .int32(Int32(PayloadLife.readOut.rawValue)), .bool(true), .int64(0)])
    }

    @Test("[4.10-1] a receipt decided from a row another store changed meanwhile writes nothing; decided again from the row as it is, it counts")
    func staleRowIsDecidedAgain() throws {
        let database = try PostgresDeployment()
        let alice = try database.sql("SELECT id FROM users WHERE name = 'alice'").uint(0, 0)
        let seq = try payload(database, user: alice, readLimit: 2)
        let stale = ReceiptRow(owner: alice, admitsDevice: true, life: .live, readLimit: 2, readCount: 0, acknowledged: false)
        // Another store's receipt from the phone lands after the tablet's request read the row.
        #expect(try ack(database, [(seq, alice, "phone")]) == [.ok])
        let decided = PostgresGroupCommit.decideReceipts([.init(sequence: seq, userID: alice, deviceID: "tablet", row: stale)])
        #expect(decided.decisions.map(\.write) == [.counted(readCount: 1)])
        let write = PostgresWriteStatements.receipts(decided.writes)
        #expect(try database.sql(write.sql, write.parameters).rows.isEmpty, "the row's count is no longer the one decided from")
        #expect(try state(database, seq) == [.int64(1), .int32(Int32(PayloadLife.live.rawValue)), .bool(false), .int64(1)])
        #expect(try ack(database, [(seq, alice, "tablet")]) == [.ok])
        #expect(try state(database, seq) == [.int64(2), .int32(Int32(PayloadLife.readOut.rawValue)), .bool(true), .int64(1)])
    }

    @Test("[4.11-1] [4.11-2] RECALLs in one statement: found ones gone (twice in the array: both OK), a missing one NOT_FOUND")
    func recalls() throws {
        let database = try PostgresDeployment()
        let alice = try database.sql("SELECT id FROM users WHERE name = 'alice'").uint(0, 0)
        let a = try payload(database, user: alice)
        let b = try payload(database, user: alice)
        let missing = b + 1000
        let statement = PostgresWriteStatements.recalls([b, missing, a, b])
        let rows = try database.sql(statement.sql, statement.parameters)
        #expect(Set(try rows.rows.indices.map { try rows.int64($0, 0) }) == [1, 3, 4])
        for seq in [a, b] { #expect(try state(database, seq) == [.int64(0), .int32(2), .bool(true), .int64(0)]) }
    }

    @Test("[4.10-1] [4.10-2] [4.11-2] ACKs and RECALLs pipelined at one store: each request its own reply")
    func pipelinedAtOneStore() async throws {
        try await onOwnThread {
            let database = try PostgresDeployment()
            let store = database.client(try database.startStore())
            let provider = try store.provider()
            let once = try (0..<20).map { try store.store("once \($0)", readLimit: 1, via: provider) }
            let kept = try (0..<20).map { try store.store("kept \($0)", via: provider) }
            let bobs = try store.store("bob's", for: "bob", via: provider)
            let phone = try store.token("alice", device: "phone")
            let tablet = try store.token("alice", device: "tablet")
            let device = try store.device()
            var sent: [(UInt32, Status?)] = []
            for index in 0..<20 {
                sent.append((try device.send(.ack(Ack(id: once[index], token: phone))), nil))
                sent.append((try device.send(.ack(Ack(id: once[index], token: tablet))), nil))
                sent.append((try device.send(.ack(Ack(id: kept[index], token: phone))), nil))
                sent.append((try device.send(.ack(Ack(id: kept[index], token: phone))), nil))
                if index % 5 == 0 {
                    sent.append((try device.send(.ack(Ack(id: bobs, token: phone))), .forbidden))
                    sent.append((try device.send(.ack(Ack(id: PayloadID.random(), token: phone))), .notFound))
                }
            }
            for (correlation, status) in sent {
                let reply = try device.reply(to: correlation)
                if let status { #expect(errorStatus(reply) == status, "\(reply)") } else { #expect(reply.type == .ackOK, "\(reply)") }
            }
            let rows = try database.sql("""
                SELECT read_limit, read_count, life, body IS NULL, (SELECT count(*) FROM receipts r WHERE r.seq = p.seq)
                FROM payloads p JOIN users u ON u.id = p.user_id WHERE u.name = 'alice' ORDER BY seq
                """)
            #expect(rows.rows.count == 40)
            // Read out by the first receipt: no receipt row, and the second device's ACK writes nothing.
            #expect(rows.rows.filter { $0 == [.int64(1), .int64(1), .int32(3), .bool(true), .int64(0)] }.count == 20, "\(rows.rows)")
            #expect(rows.rows.filter { $0 == [.int64(0), .int64(1), .int32(1), .bool(false), .int64(1)] }.count == 20, "\(rows.rows)")
            let recalls = try [kept[0], kept[1], kept[0], PayloadID.random()].map { try provider.send(.recall(Recall(id: $0))) }
            let replies = try recalls.map { try provider.reply(to: $0) }
            #expect(replies.prefix(3).allSatisfy { $0.type == .recallOK }, "\(replies)")
            #expect(errorStatus(replies[3]) == .notFound, "\(replies[3])")
            #expect(try database.sql("SELECT count(*) FROM payloads WHERE life = 2 AND body IS NULL").int64(0, 0) == 2)
        }
    }
}
