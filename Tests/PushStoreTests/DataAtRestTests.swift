import Foundation
@testable import PushStoreLogic
@testable import PushStoreSQLite
import Testing
import PushSecurity
import PushWire
@testable import PushStore

extension StoreFixture {
    /// The stored row of a payload, as on disk.
    func row(_ id: PayloadID) throws -> (keyID: Int64?, body: [UInt8]?, userID: Int64) {
        let connection = try SQLiteConnection(path: databasePath)
        let statement = try connection.prepare("SELECT key_id, body, user_id FROM payloads WHERE id_high = ? AND id_low = ?", persistent: false)
        try statement.bind(SQLitePayloadDatabase.idValues(id))
        guard try statement.step() else { throw StoreTestError.unexpected(nil) }
        return (statement.isNull(0) ? nil : statement.int(0), statement.isNull(1) ? nil : statement.blob(1), statement.int(2))
    }

    func sequence(_ id: PayloadID) throws -> UInt64 {
        try #require(try locate(id)).sequence
    }

    func fileMode(_ path: String) throws -> Int {
        try (FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? -1
    }
}

@Suite("Payloads at rest")
struct DataAtRestTests {
    @Test("the prune rule both backends share: a key held, older than the current one, that no row uses")
    func pruneRule() {
        func key(_ id: UInt32, rows: Int = 0, held: Bool = true, current: UInt32 = 3, pending: Bool = false) -> DataKeyUsage {
            DataKeyUsage(keyID: id, rows: rows, isHeld: held, isCurrent: id == current, sealsInMs: pending ? 2_000 : nil)
        }
        let usage = [key(0, rows: 4, held: false), key(1), key(2, rows: 1), key(3), key(4, pending: true), key(5, held: false)]
        #expect(DataKeyUsage.prunable(usage) == [1])
        #expect(DataKeyUsage.prunable([key(1), key(2)]) == [], "no key current: nothing is known to supersede them")
        #expect(DataKeyUsage.merge(held: [1, 3], rows: [2: 5, 3: 1], current: 3, sealsInMs: [3: 10]).map(\.keyID) == [1, 2, 3])
    }

    @Test("the reasons prune keeps a key for, one rule for both backends: current, not sealing yet, superseded within the settle time, payloads under it")
    func keepReasons() {
        var recent = DataKeyUsage(keyID: 2, rows: 7, isHeld: true, isCurrent: false)
        recent.supersededAgoMs = 1_200
        let usage = [DataKeyUsage(keyID: 0, rows: 4, isHeld: false, isCurrent: false),
                     DataKeyUsage(keyID: 1, rows: 0, isHeld: true, isCurrent: false, supersededAgoMs: 60_000),
                     recent,
                     DataKeyUsage(keyID: 3, rows: 1, isHeld: true, isCurrent: true),
                     DataKeyUsage(keyID: 4, rows: 0, isHeld: true, isCurrent: false, sealsInMs: 1_500)]
        let reasons = DataKeyUsage.keepReasons(usage, settleMs: 5_000, resealing: .startsIn(ms: 3_800))
        #expect(reasons.map(\.keyID) == [1, 2, 3, 4], "every key held, the clear rows' 0 not a key")
        #expect(reasons.map(\.reasons) == [[], [.supersededRecently(agoMs: 1_200, settleMs: 5_000), .sealsPayloads(7, .startsIn(ms: 3_800))],
                                          [.current], [.notSealingYet(inMs: 1_500)]])
        #expect(DataKeyUsage.prunable(usage, settleMs: 5_000) == [1])
        #expect(reasons[1].reasons.map(\.description) == [
            "superseded less than 5 seconds ago (1 second ago): a store may still seal under it; it may go from 4 seconds from now",
            "7 payloads still sealed under it: re-sealing begins in 4 seconds, once every store seals under the current key",
        ])
        // SQLite: nothing settles, the store's writer re-seals in the background.
        #expect(DataKeyUsage.keepReasons(usage, settleMs: 0, resealing: .inBackground)[1].reasons
                == [.sealsPayloads(7, .inBackground)])
    }

    @Test("a body is stored sealed under the newest data key and read back in clear")
    func sealedAtRest() throws {
        let store = try StoreFixture()
        let id = try store.store("attack at dawn")
        let row = try store.row(id)
        #expect(row.keyID == 1)
        let body = try #require(row.body)
        #expect(body.count == "attack at dawn".utf8.count + AES256GCM.overhead)
        #expect(!String(decoding: body, as: UTF8.self).contains("attack"))
        #expect(try store.locate(id)?.body == Array("attack at dawn".utf8))
    }

    @Test("a sealed body moved to another payload or another user does not open")
    func boundToIDAndUser() throws {
        let store = try StoreFixture()
        let first = try store.store("first")
        let second = try store.store("second")
        let connection = try SQLiteConnection(path: store.databasePath)
        let (one, two) = (try store.sequence(first), try store.sequence(second))
        try connection.execute("UPDATE payloads SET body = (SELECT body FROM payloads WHERE seq = \(one)) WHERE seq = \(two)")
        #expect(throws: SQLiteError.self) { try store.reader.payload(sequence: two) }
        let bob = try #require(try store.reader.user(named: "bob"))
        try connection.execute("UPDATE payloads SET user_id = \(Int64(bitPattern: bob.id)) WHERE seq = \(one)")
        #expect(throws: SQLiteError.self) { try store.reader.payload(sequence: one) }
        // The store answers INTERNAL rather than hand out bytes it cannot vouch for.
        let token = try store.token(user: "bob")
        #expect(status(of: try store.send(.fetch(Fetch(id: first, token: token)), on: store.session(.device))) == .internalError)
        // Only FETCH opens a body: STATUS and RECALL never touch it.
        #expect(status(of: try store.send(.status(StatusRequest(id: second)), on: store.session(.provider))) == .ok)
        #expect(try store.send(.recall(Recall(id: second)), on: store.session(.provider)) == .recallOK(RecallOK(id: second)))
    }

    @Test("recalled, read-out and expired payloads keep no body and no key")
    func erasedBodies() throws {
        let store = try StoreFixture()
        let recalled = try store.store("recall me")
        let readOnce = try store.store("read me once", readLimit: 1)
        let expiring = try store.store("expire me", ttl: 1)
        #expect(try store.send(.recall(Recall(id: recalled)), on: store.session(.provider)) == .recallOK(RecallOK(id: recalled)))
        #expect(try store.send(.ack(Ack(id: readOnce, token: try store.token())), on: store.session(.device)) == .ackOK(AckOK(id: readOnce)))
        store.now += 2_000
        _ = try store.writer.sweepExpired(nowMs: store.now)
        for id in [recalled, readOnce, expiring] {
            let row = try store.row(id)
            #expect(row.body == nil && row.keyID == nil)
        }
    }

    @Test("after a rotation new bodies take the new key, old ones are re-sealed in the background, then the old key can go")
    func rotation() throws {
        let store = try StoreFixture()
        let old = try (0..<300).map { try store.store("old \($0)") }
        let keys = try DataKeyAdministration(databasePath: store.databasePath)
        #expect(try keys.rotate().keyID == 2)
        #expect(try keys.prune() == [], "key 1 still seals 300 payloads")
        let new = try store.store("new")
        #expect(try store.row(new).keyID == 2, "the writer looks at the key file before it seals")
        #expect(try store.writer.idleStep(nowMs: store.now), "one window of seqs holds all 300")
        #expect(try store.writer.idleStep(nowMs: store.now) == false, "and the pass ends at the seq it began with")
        #expect(try keys.usage().map { [$0.keyID, UInt32($0.rows)] } == [[1, 0], [2, 301]])
        #expect(try keys.prune() == [1])
        #expect(try DataKeyFile.read(keys.keysPath).map(\.id) == [2])
        let token = try store.token()
        for id in old + [new] {
            guard case .fetchOK? = try store.send(.fetch(Fetch(id: id, token: token)), on: store.session(.device)) else {
                Issue.record("FETCH of \(id) failed after the rotation"); return
            }
        }
    }

    @Test("an idle writer notices a key added by another process and re-seals without any write")
    func idleWriterNoticesRotation() throws {
        let store = try StoreFixture()
        _ = try (0..<10).map { try store.store("old \($0)") }
        while try store.writer.idleStep(nowMs: store.now) {}
        _ = try DataKeyFile.add(StoreFiles.dataKeysPath(forDatabase: store.databasePath))
        #expect(try store.writer.idleStep(nowMs: store.now), "a new key starts a new pass")
        #expect(try store.writer.idleStep(nowMs: store.now) == false)
        let keys = try DataKeyAdministration(databasePath: store.databasePath)
        #expect(try keys.usage().map { [$0.keyID, UInt32($0.rows)] } == [[1, 0], [2, 10]])
    }

    @Test("each request's read snapshot ends with it: nothing holds back a full checkpoint")
    func snapshotsEnd() throws {
        let store = try StoreFixture()
        let id = try store.store("x")
        let token = try store.token()
        _ = try store.send(.fetch(Fetch(id: id, token: token)), on: store.session(.device))
        _ = try store.send(.fetch(Fetch(id: PayloadID.random(), token: token)), on: store.session(.device))
        _ = try store.send(.sync(Sync(token: token)), on: store.session(.device))
        try store.writer.checkpoint()
        let wal = try FileManager.default.attributesOfItem(atPath: store.databasePath + "-wal")[.size] as? Int
        #expect(wal == 0, "a read transaction left open would keep the WAL from being truncated")
    }

    @Test("a pass skips the gaps deleted rows leave, and passes over a row it cannot open")
    func resealAcrossGaps() throws {
        let store = try StoreFixture()
        let ids = try (0..<3).map { try store.store("payload \($0)") }
        let connection = try SQLiteConnection(path: store.databasePath)
        // A gap of a million seqs, and a row sealed under a key the file does not hold.
        try connection.execute("UPDATE sqlite_sequence SET seq = 1000000 WHERE name = 'payloads'")
        let far = try store.store("far")
        try connection.execute("UPDATE payloads SET key_id = 0, body = x'636c656172' WHERE seq = \(try store.sequence(ids[1]))")
        try connection.execute("UPDATE payloads SET key_id = 9 WHERE seq = \(try store.sequence(ids[2]))")
        let keys = try DataKeyAdministration(databasePath: store.databasePath)
        _ = try keys.rotate()
        var steps = 0
        while try store.writer.idleStep(nowMs: store.now) { steps += 1 }
        #expect(steps == 2, "two windows: the first rows, then the far one")
        #expect(try store.row(ids[0]).keyID == 2)
        #expect(try store.row(far).keyID == 2)
        #expect(try store.row(ids[1]).keyID == 2, "a clear body is sealed")
        #expect(try store.locate(ids[1])?.body == Array("clear".utf8))
        #expect(try keys.usage().map { [$0.keyID, UInt32($0.rows)] } == [[1, 0], [2, 3], [9, 1]], "key 9's row is left as it was")
        #expect(try keys.usage().last?.isHeld == false)
    }

    @Test("key prune --reseal re-seals what no running store has, then prunes")
    func resealInTheCommand() throws {
        let store = try StoreFixture()
        let id = try store.store("old")
        let keys = try DataKeyAdministration(databasePath: store.databasePath)
        _ = try keys.rotate()
        #expect(try keys.resealAll() == 0)
        #expect(try store.row(id).keyID == 2)
        #expect(try keys.prune() == [1])
    }

    @Test("the database files are created owner-only, and earlier ones made owner-only at start")
    func fileModes() throws {
        let scratch = try ScratchDatabase("modes")
        for path in StoreFiles.databaseFiles(scratch.path) {
            FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o644])
        }
        try FileManager.default.removeItem(atPath: scratch.path)
        let wal = scratch.path + "-wal"
        // An existing, world-readable WAL, and a database SQLite has not created yet.
        let writer = try SQLitePayloadWriter(path: scratch.path)
        try withExtendedLifetime(writer) {
            for path in [scratch.path, wal, scratch.path + "-shm", StoreFiles.dataKeysPath(forDatabase: scratch.path)] {
                let mode = try (FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? -1
                #expect(mode == 0o600, "\(path)")
            }
        }
    }
}
