import Foundation
import Testing
@testable import PushStore

@Suite("SQLite schema")
struct SchemaMigrationTests {
    @Test("a database from before the in-memory ID map loses its ID index and keeps its rows")
    func dropsTheOldIDIndex() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("schema-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent(SQLitePayloadDatabase.fileName).path
        do {
            // What an earlier build left on disk: the unique ID index and no user_version.
            let old = try SQLiteConnection(path: path)
            try old.execute(SQLitePayloadDatabase.schema)
            try old.execute("CREATE UNIQUE INDEX payloads_by_id ON payloads(id_high, id_low)")
            try old.execute("INSERT INTO payloads (id_high, id_low, user, body, created_at, expires_at, read_limit) VALUES (1, 2, 'alice', x'00', 0, 1, 0)")
        }
        let writer = try SQLitePayloadWriter(path: path)
        let reader = try SQLitePayloadReader(path: path)
        _ = writer
        #expect(try reader.allIDs().count == 1)
        let check = try SQLiteConnection(path: path)
        let index = try check.prepare("SELECT count(*) FROM sqlite_master WHERE name = 'payloads_by_id'")
        #expect(try index.step() && index.int(0) == 0)
        let version = try check.prepare("PRAGMA user_version")
        #expect(try version.step() && version.int(0) == SQLitePayloadDatabase.migrations.last?.version)
    }
}
