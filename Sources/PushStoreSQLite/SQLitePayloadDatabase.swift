import CSQLite
import PushWire

/// The embedded default persistence: one SQLite file in WAL mode with synchronous=FULL,
/// so a COMMIT returns only once the write-ahead log is on disk.
public enum SQLitePayloadDatabase {
    public static let fileName = "store.sqlite"

    /// Opens (creating if needed) the database, owner-only, and brings its schema up to date.
    static func open(path: String) throws(SQLiteError) -> SQLiteConnection {
        try StoreFiles.protectDatabaseFiles(path)
        let connection = try SQLiteConnection(path: path)
        // Only takes effect on a new file; lets the sweeper hand freed pages back.
        try connection.execute("PRAGMA auto_vacuum = INCREMENTAL")
        try connection.execute("PRAGMA journal_mode = WAL")
        try connection.execute("PRAGMA synchronous = FULL")
        // Burn-after-read and user removal mean the bytes: deleted content is overwritten
        // with zeros, inside pages and in pages handed back to the free list.
        try connection.execute("PRAGMA secure_delete = ON")
        try SQLiteSchema.prepare(connection)
        return connection
    }

    static func idValues(_ id: PayloadID) -> [SQLiteStatement.Value] {
        [.int(Int64(bitPattern: id.high)), .int(Int64(bitPattern: id.low))]
    }
}

extension SQLiteStatement.Value {
    static func uint(_ value: UInt64) -> Self { .int(Int64(bitPattern: value)) }
}
