import Foundation
@testable import PushStoreLogic
@testable import PushStoreSQLite
import Testing
import PushWire
@testable import PushStore

/// The tables as the first builds wrote them (user_version 0), kept verbatim: what a
/// deployment made before user identities and sealed payloads has on disk.
let schemaVersion0 = """
    CREATE TABLE IF NOT EXISTS users (
        name TEXT PRIMARY KEY,
        password_hash TEXT NOT NULL,
        created_at INTEGER NOT NULL
    );
    CREATE TABLE IF NOT EXISTS payloads (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id_high INTEGER NOT NULL,
        id_low INTEGER NOT NULL,
        user TEXT NOT NULL,
        body BLOB,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        read_limit INTEGER NOT NULL,
        read_count INTEGER NOT NULL DEFAULT 0,
        fetch_count INTEGER NOT NULL DEFAULT 0,
        fetched_at INTEGER NOT NULL DEFAULT 0,
        life INTEGER NOT NULL DEFAULT 1
    );
    CREATE TABLE IF NOT EXISTS receipts (
        seq INTEGER NOT NULL,
        device TEXT NOT NULL,
        PRIMARY KEY (seq, device)
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS live_by_user ON payloads(user, seq) WHERE life = 1;
    CREATE INDEX IF NOT EXISTS payloads_by_expiry ON payloads(expires_at);
    """

/// A scratch directory for one database, removed on deinit.
final class ScratchDatabase {
    let directory: URL
    var path: String { directory.appendingPathComponent(SQLitePayloadDatabase.fileName).path }

    init(_ label: String = "schema") throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(label)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    func integer(_ sql: String) throws -> Int64? {
        let connection = try SQLiteConnection(path: path)
        return try connection.integer(sql)
    }
}

@Suite("SQLite schema")
struct SchemaMigrationTests {
    /// Writes what a version-0 build left: alice with a live and a read-out payload and a
    /// receipt, and a payload of dave, who was removed (his row in users is gone).
    private func writeVersion0(_ path: String, uniqueIDIndex: Bool = false) throws {
        let old = try SQLiteConnection(path: path)
        try old.execute(schemaVersion0)
        if uniqueIDIndex { try old.execute("CREATE UNIQUE INDEX payloads_by_id ON payloads(id_high, id_low)") }
        try old.execute("""
            INSERT INTO users (name, password_hash, created_at) VALUES ('alice', 'hash-a', 1000), ('bob', 'hash-b', 2000);
            INSERT INTO payloads (seq, id_high, id_low, user, body, created_at, expires_at, read_limit)
                VALUES (5, 1, 2, 'alice', x'68656c6c6f', 0, 9999999999999, 0);
            INSERT INTO payloads (seq, id_high, id_low, user, body, created_at, expires_at, read_limit, read_count, life)
                VALUES (6, 3, 4, 'alice', NULL, 0, 9999999999999, 1, 1, 3);
            INSERT INTO payloads (seq, id_high, id_low, user, body, created_at, expires_at, read_limit)
                VALUES (9, 7, 8, 'dave', x'6f6c64', 0, 9999999999999, 0);
            INSERT INTO receipts (seq, device) VALUES (6, 'phone'), (9, 'dave-phone');
            """)
    }

    @Test("a database from before the in-memory ID map loses its ID index and keeps its rows")
    func dropsTheOldIDIndex() throws {
        let scratch = try ScratchDatabase()
        try writeVersion0(scratch.path, uniqueIDIndex: true)
        let writer = try SQLitePayloadWriter(path: scratch.path)
        let reader = try SQLitePayloadReader(path: scratch.path)
        _ = writer
        #expect(try reader.allIDs().count == 2)
        #expect(try scratch.integer("SELECT count(*) FROM sqlite_master WHERE name = 'payloads_by_id'") == 0)
        #expect(try scratch.integer("PRAGMA user_version") == SQLiteSchema.currentVersion)
    }

    @Test("version 0 to 2: users get ids, payloads follow their user, an orphan's payloads and receipts go")
    func addsIdentities() throws {
        let scratch = try ScratchDatabase()
        try writeVersion0(scratch.path)
        let reader = try SQLitePayloadReader(path: scratch.path)
        let alice = try #require(try reader.user(named: "alice"))
        let bob = try #require(try reader.user(named: "bob"))
        #expect(alice.passwordHash == "hash-a" && alice.createdAt == 1000)
        #expect(alice.id != 0 && bob.id != 0 && alice.id != bob.id)

        let live = try #require(try reader.payload(sequence: 5))
        #expect(live.userID == alice.id)
        #expect(live.body == Array("hello".utf8), "a body stored in clear stays readable until it is re-sealed")
        #expect(try reader.payload(sequence: 6)?.life == .readOut)
        #expect(try reader.payload(sequence: 9) == nil, "dave no longer exists: whoever gets his name next must not read this")
        #expect(try scratch.integer("SELECT count(*) FROM receipts") == 1)
        #expect(try scratch.integer("SELECT count(*) FROM payloads WHERE key_id = 0") == 1)
        #expect(try scratch.integer("SELECT count(*) FROM payloads WHERE body IS NULL AND key_id IS NULL") == 1)
        #expect(try reader.unread(userID: alice.id, UnreadQuery(deviceID: "tablet", cursor: 0, limit: 10, nowMs: 1)).ids
                == [PayloadID(high: 1, low: 2)])
    }

    @Test("the payload sequence never goes back, even past the rows the migration deleted")
    func keepsTheSequence() throws {
        let scratch = try ScratchDatabase()
        try writeVersion0(scratch.path)
        let writer = try SQLitePayloadWriter(path: scratch.path)
        let outcome = try writer.commit([.store(NewPayload(id: PayloadID(high: 10, low: 10), user: "alice", body: [1],
                                                           createdAt: 1, expiresAt: 9_999_999_999_999, readLimit: 0, sender: "provider-key"))])
        #expect(outcome == [.stored(sequence: 10)], "dave's row 9 was the highest; SYNC cursors of 9 must still see what comes next")
    }

    @Test("clear bodies left by an earlier build are sealed in the background by the writer")
    func resealsClearBodies() throws {
        let scratch = try ScratchDatabase()
        try writeVersion0(scratch.path)
        let writer = try SQLitePayloadWriter(path: scratch.path)
        while try writer.idleStep(nowMs: 0) {}
        #expect(try scratch.integer("SELECT count(*) FROM payloads WHERE key_id = 0") == 0)
        #expect(try scratch.integer("SELECT count(*) FROM payloads WHERE key_id = 1") == 1)
        let reader = try SQLitePayloadReader(path: scratch.path)
        #expect(try reader.payload(sequence: 5)?.body == Array("hello".utf8))
    }

    @Test("[4.9-4] version 5 to 7: payloads stored before audiences are for their whole user, and SEND's audiences are kept from then on")
    func addsAudiences() throws {
        let scratch = try ScratchDatabase()
        let admin = try UserAdministration(databasePath: scratch.path)
        let alice = try #require(try admin.add("alice", passwordHash: "h", nowMs: 5))
        // What a version-5 build left: no sender or audience column, no audiences table.
        let old = try SQLiteConnection(path: scratch.path)
        try old.execute("""
            DROP TABLE audiences;
            ALTER TABLE payloads DROP COLUMN audience;
            ALTER TABLE payloads DROP COLUMN sender;
            INSERT INTO payloads (seq, id_high, id_low, user_id, key_id, body, created_at, expires_at, read_limit)
                VALUES (3, 1, 2, \(alice.id), NULL, NULL, 0, 9999999999999, 0);
            PRAGMA user_version = 5;
            """)
        let writer = try SQLitePayloadWriter(path: scratch.path)
        #expect(try scratch.integer("PRAGMA user_version") == SQLiteSchema.currentVersion)
        #expect(try scratch.integer("SELECT audience FROM payloads WHERE seq = 3") == 0)
        var targeted = NewPayload(id: PayloadID(high: 3, low: 4), user: "alice", body: [1], createdAt: 1, expiresAt: 9_999_999_999_999, readLimit: 0,
                                  sender: "provider-key")
        targeted.audience = .devices(["decoy"])
        #expect(try writer.commit([.store(targeted)]) == [.stored(sequence: 4)])
        let reader = try SQLitePayloadReader(path: scratch.path)
        for (device, expected) in [("tablet", [PayloadID(high: 1, low: 2)]), ("decoy", [PayloadID(high: 3, low: 4), PayloadID(high: 1, low: 2)])] {
            #expect(try reader.unread(userID: alice.id, UnreadQuery(deviceID: device, cursor: 0, limit: 10, nowMs: 1)).ids == expected, "\(device)")
        }
    }

    @Test("opening a current database again changes nothing")
    func reopens() throws {
        let scratch = try ScratchDatabase()
        let first = try UserAdministration(databasePath: scratch.path)
        let added = try #require(try first.add("carol", passwordHash: "h", nowMs: 5))
        _ = try SQLitePayloadWriter(path: scratch.path)
        _ = try SQLitePayloadReader(path: scratch.path)
        #expect(try SQLitePayloadReader(path: scratch.path).user(named: "carol") == added)
        #expect(try scratch.integer("PRAGMA user_version") == SQLiteSchema.currentVersion)
    }
}
