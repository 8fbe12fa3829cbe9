import CSQLite
import PushWire

/// The embedded default persistence: one SQLite file in WAL mode with synchronous=FULL,
/// so a COMMIT returns only once the write-ahead log is on disk.
public enum SQLitePayloadDatabase {
    public static let fileName = "store.sqlite"

    static let schema = """
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

    /// Changes to databases written by earlier builds, by the `user_version` they lead to.
    static let migrations: [(version: Int64, sql: String)] = [
        // IDs are mapped to rows in memory now; the unique index on them only slowed STOREs.
        (1, "DROP INDEX IF EXISTS payloads_by_id"),
    ]

    /// Opens (creating if needed) the database and its schema.
    static func open(path: String) throws(SQLiteError) -> SQLiteConnection {
        let connection = try SQLiteConnection(path: path)
        // Only takes effect on a new file; lets the sweeper hand freed pages back.
        try connection.execute("PRAGMA auto_vacuum = INCREMENTAL")
        try connection.execute("PRAGMA journal_mode = WAL")
        try connection.execute("PRAGMA synchronous = FULL")
        // Burn-after-read means the bytes: overwrite freed content inside pages.
        try connection.execute("PRAGMA secure_delete = FAST")
        try connection.execute(schema)
        try migrate(connection)
        return connection
    }

    private static func migrate(_ connection: SQLiteConnection) throws(SQLiteError) {
        let query = try connection.prepare("PRAGMA user_version")
        let current = try query.step() ? query.int(0) : 0
        query.reset()
        for migration in migrations where migration.version > current {
            do {
                try connection.execute("BEGIN IMMEDIATE; \(migration.sql); PRAGMA user_version = \(migration.version); COMMIT")
            } catch {
                try? connection.execute("ROLLBACK")
                throw error
            }
        }
    }

    static func idValues(_ id: PayloadID) -> [SQLiteStatement.Value] {
        [.int(Int64(bitPattern: id.high)), .int(Int64(bitPattern: id.low))]
    }
}

extension SQLiteStatement.Value {
    static func uint(_ value: UInt64) -> Self { .int(Int64(bitPattern: value)) }
}

/// The writer thread's side.
public final class SQLitePayloadWriter: PayloadWriter {
    private let connection: SQLiteConnection
    private let insert: SQLiteStatement
    private let lookup: SQLiteStatement
    private let addReceipt: SQLiteStatement
    private let markRead: SQLiteStatement
    private let markRecalled: SQLiteStatement
    private let markFetched: SQLiteStatement
    private let emptyExpired: SQLiteStatement
    private let forgetOld: SQLiteStatement
    private let forgetReceipts: SQLiteStatement

    /// How long an emptied row is kept so FETCH can still say GONE rather than NOT_FOUND.
    public static let tombstoneRetentionMs: UInt64 = 7 * 24 * 3600 * 1000

    public init(path: String) throws(SQLiteError) {
        connection = try SQLitePayloadDatabase.open(path: path)
        insert = try connection.prepare("""
            INSERT INTO payloads (id_high, id_low, user, body, created_at, expires_at, read_limit)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            """)
        lookup = try connection.prepare("SELECT user FROM payloads WHERE seq = ?")
        addReceipt = try connection.prepare("INSERT OR IGNORE INTO receipts (seq, device) VALUES (?, ?)")
        markRead = try connection.prepare("""
            UPDATE payloads SET read_count = read_count + 1,
                life = CASE WHEN life = 1 AND read_limit > 0 AND read_count + 1 >= read_limit THEN 3 ELSE life END,
                body = CASE WHEN read_limit > 0 AND read_count + 1 >= read_limit THEN NULL ELSE body END
            WHERE seq = ?
            """)
        markRecalled = try connection.prepare("UPDATE payloads SET life = 2, body = NULL WHERE seq = ?")
        markFetched = try connection.prepare("UPDATE payloads SET fetch_count = fetch_count + ?, fetched_at = max(fetched_at, ?) WHERE seq = ?")
        emptyExpired = try connection.prepare("UPDATE payloads SET life = 4, body = NULL WHERE expires_at <= ? AND life = 1")
        forgetOld = try connection.prepare("DELETE FROM payloads WHERE expires_at <= ?")
        forgetReceipts = try connection.prepare("DELETE FROM receipts WHERE seq NOT IN (SELECT seq FROM payloads)")
    }

    public func commit(_ operations: [WriteOperation]) throws -> [WriteOutcome] {
        try connection.execute("BEGIN IMMEDIATE")
        do {
            var outcomes: [WriteOutcome] = []
            outcomes.reserveCapacity(operations.count)
            for operation in operations {
                outcomes.append(try apply(operation))
            }
            try connection.execute("COMMIT")
            return outcomes
        } catch {
            try? connection.execute("ROLLBACK")
            throw error
        }
    }

    private func apply(_ operation: WriteOperation) throws(SQLiteError) -> WriteOutcome {
        switch operation {
        case .store(let new):
            try insert.run(SQLitePayloadDatabase.idValues(new.id) + [
                .text(new.user), .blob(new.body), .uint(new.createdAt), .uint(new.expiresAt), .int(Int64(new.readLimit)),
            ])
            return .stored(sequence: connection.lastInsertedRow)
        case .ack(let sequence, let user, let deviceID):
            // Idempotent, and a gone payload can still be acknowledged ([4.10-2]).
            guard let owner = try owner(of: sequence) else { return .failed(.notFound) }
            guard owner == user else { return .failed(.forbidden) }
            try addReceipt.run([.uint(sequence), .text(deviceID)])
            if connection.changes == 1 { try markRead.run([.uint(sequence)]) }
            return .ok
        case .recall(let sequence):
            // Recalling what is already gone succeeds ([4.11-2]).
            guard try owner(of: sequence) != nil else { return .failed(.notFound) }
            try markRecalled.run([.uint(sequence)])
            return .ok
        case .recordFetches(let tallies):
            for tally in tallies {
                try markFetched.run([.int(Int64(tally.count)), .uint(tally.lastAtMs), .uint(tally.sequence)])
            }
            return .ok
        }
    }

    /// Looked up inside the transaction, so two racing receipts for a read-once payload
    /// are counted one after the other.
    private func owner(of sequence: UInt64) throws(SQLiteError) -> String? {
        try lookup.bind([.uint(sequence)])
        defer { lookup.reset() }
        return try lookup.step() ? lookup.text(0) : nil
    }

    public func sweepExpired(nowMs: UInt64) throws -> Int {
        try connection.execute("BEGIN IMMEDIATE")
        do {
            try emptyExpired.run([.uint(nowMs)])
            let emptied = connection.changes
            let horizon = nowMs > SQLitePayloadWriter.tombstoneRetentionMs ? nowMs - SQLitePayloadWriter.tombstoneRetentionMs : 0
            try forgetOld.run([.uint(horizon)])
            if connection.changes > 0 { try forgetReceipts.run([]) }
            try connection.execute("COMMIT")
            if emptied > 0 { try connection.execute("PRAGMA incremental_vacuum") }
            return emptied
        } catch {
            try? connection.execute("ROLLBACK")
            throw error
        }
    }

    // MARK: users (administration, not the request path)

    public func addUser(_ name: String, passwordHash: String, nowMs: UInt64) throws -> Bool {
        let statement = try connection.prepare("INSERT OR IGNORE INTO users (name, password_hash, created_at) VALUES (?, ?, ?)")
        try statement.run([.text(name), .text(passwordHash), .uint(nowMs)])
        return connection.changes == 1
    }

    public func removeUser(_ name: String) throws -> Bool {
        let statement = try connection.prepare("DELETE FROM users WHERE name = ?")
        try statement.run([.text(name)])
        return connection.changes == 1
    }

    public func checkpoint() throws {
        try connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    }
}

/// The event loop's side: reads never wait for the writer (WAL readers see the last
/// committed snapshot).
public final class SQLitePayloadReader: PayloadReader {
    private let connection: SQLiteConnection
    private let bySequence: SQLiteStatement
    private let everyID: SQLiteStatement
    private let unreadPage: SQLiteStatement
    private let userHash: SQLiteStatement

    public init(path: String) throws(SQLiteError) {
        connection = try SQLitePayloadDatabase.open(path: path)
        bySequence = try connection.prepare("""
            SELECT id_high, id_low, user, body, created_at, expires_at, read_limit, read_count, fetch_count, fetched_at, life
            FROM payloads WHERE seq = ?
            """)
        everyID = try connection.prepare("SELECT id_high, id_low, seq FROM payloads")
        unreadPage = try connection.prepare("""
            SELECT seq, id_high, id_low FROM payloads
            WHERE user = ? AND seq > ? AND life = 1 AND expires_at > ?
              AND NOT EXISTS (SELECT 1 FROM receipts WHERE receipts.seq = payloads.seq AND receipts.device = ?)
            ORDER BY seq LIMIT ?
            """)
        userHash = try connection.prepare("SELECT password_hash FROM users WHERE name = ?")
    }

    public func payload(sequence: UInt64) throws -> StoredPayload? {
        try bySequence.bind([.uint(sequence)])
        defer { bySequence.reset() }
        guard try bySequence.step() else { return nil }
        let row = bySequence
        return StoredPayload(
            id: PayloadID(high: UInt64(bitPattern: row.int(0)), low: UInt64(bitPattern: row.int(1))), sequence: sequence,
            user: row.text(2), body: row.blob(3),
            createdAt: UInt64(bitPattern: row.int(4)), expiresAt: UInt64(bitPattern: row.int(5)),
            readLimit: UInt32(truncatingIfNeeded: row.int(6)), readCount: UInt32(truncatingIfNeeded: row.int(7)),
            fetchCount: UInt32(truncatingIfNeeded: row.int(8)), fetchedAt: UInt64(bitPattern: row.int(9)),
            life: PayloadLife(rawValue: row.int(10)) ?? .expired)
    }

    public func allIDs() throws -> [(PayloadID, UInt64)] {
        try everyID.bind([])
        defer { everyID.reset() }
        var all: [(PayloadID, UInt64)] = []
        while try everyID.step() {
            all.append((PayloadID(high: UInt64(bitPattern: everyID.int(0)), low: UInt64(bitPattern: everyID.int(1))),
                        UInt64(everyID.int(2))))
        }
        return all
    }

    public func unread(user: String, deviceID: String, after cursor: UInt64, limit: Int, nowMs: UInt64) throws -> UnreadPage {
        // One row more than asked tells whether another page follows.
        try unreadPage.bind([.text(user), .uint(cursor), .uint(nowMs), .text(deviceID), .int(Int64(limit + 1))])
        defer { unreadPage.reset() }
        var ids: [PayloadID] = []
        var next = cursor
        var hasMore = false
        while try unreadPage.step() {
            if ids.count == limit {
                hasMore = true
                break
            }
            next = UInt64(unreadPage.int(0))
            ids.append(PayloadID(high: UInt64(bitPattern: unreadPage.int(1)), low: UInt64(bitPattern: unreadPage.int(2))))
        }
        return UnreadPage(ids: ids, cursor: next, hasMore: hasMore)
    }

    public func passwordHash(user: String) throws -> String? {
        try userHash.bind([.text(user)])
        defer { userHash.reset() }
        return try userHash.step() ? userHash.text(0) : nil
    }
}
