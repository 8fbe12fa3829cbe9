import PushPostgres
import PushSecurity

/// Why the data keys of a PostgreSQL deployment could not be read or changed.
public enum PostgresDataKeyError: Error, CustomStringConvertible, Sendable {
    case keys(DataKeyError)
    case database(PostgresError)

    public var description: String {
        switch self {
        case .keys(let error): "data keys: \(error)"
        case .database(let error): "data keys: \(error)"
        }
    }
}

/// The data keys of a PostgreSQL deployment live in the database (`data_keys`), each
/// wrapped under the deployment's `data-keys` file (`DataKeyWrapping`), so that every store
/// host has the same keys: `key rotate` on any host adds a row, and every store reads the
/// table every second. The file is no longer rotated there; it is the secret that opens the
/// table, the same on every host.
///
/// Timing, by the database's clock, so hosts' clocks do not matter:
/// - A new key seals only from `activationDelayMs` after it is added. Every store has read
///   it by then, so none meets a payload sealed under a key it does not know yet.
/// - A store may seal under the key before for up to a refresh after that. Only once a key
///   has been superseded for `settleMs` do re-sealing passes begin and may `key prune`
///   remove it; the foreign key from `payloads.key_id` still refuses the removal of any key
///   a row uses, and fails a STORE sealed under a key removed, so nothing is ever sealed
///   under a key that is gone.
enum PostgresDataKeys {
    static let activationDelayMs: UInt64 = 2_000
    static let refreshMs = 1_000
    static let settleMs: UInt64 = 5_000
    /// `pg_advisory_xact_lock` key of imports and rotations ("sp-keys!").
    static let lock: Int64 = 0x7370_2D6B_6579_7321
    /// The name of the foreign key from `payloads.key_id`, which a STORE's error names.
    static let foreignKey = "payloads_sealed_under_data_key"
    /// The database's clock in unix milliseconds.
    static let nowSQL = "(extract(epoch from clock_timestamp()) * 1000)::bigint"

    /// One row of `data_keys`.
    struct Row: Equatable {
        var id: UInt32
        var wrapped: [UInt8]
        var wrappedBy: UInt32
        var activeAt: UInt64
    }

    /// The table as one read saw it, with the database's clock and the shared re-sealing pass.
    struct Snapshot {
        var rows: [Row]
        var nowMs: UInt64
        /// The key the last finished re-sealing pass moved rows to.
        var resealedTo: UInt32

        /// The newest key in use: seals new payloads.
        var current: UInt32? { rows.filter { $0.activeAt <= nowMs }.map(\.id).max() }

        /// A pass is due: the current key has been sealing for `settleMs` (every store seals
        /// under it) and no pass for it has finished.
        var resealDue: Bool {
            guard let current, let row = rows.first(where: { $0.id == current }) else { return false }
            return resealedTo < current && row.activeAt + settleMs <= nowMs
        }
    }

    static let select = PostgresStatement("""
        SELECT k.id, k.wrapped, k.wrapped_by, k.active_at, \(nowSQL), r.key_id
        FROM data_key_reseal r LEFT JOIN data_keys k ON true WHERE r.id = 1 ORDER BY k.id
        """, [], prepared: true)

    static func decode(_ result: PostgresResult) throws(PostgresError) -> Snapshot {
        guard !result.rows.isEmpty else { throw PostgresError(kind: .protocolViolation, message: "data_key_reseal has no row") }
        var snapshot = Snapshot(rows: [], nowMs: try result.uint(0, 4), resealedTo: UInt32(clamping: try result.uint(0, 5)))
        for row in result.rows.indices where !result.isNull(row, 0) {
            snapshot.rows.append(Row(id: UInt32(clamping: try result.uint(row, 0)), wrapped: try result.bytes(row, 1),
                                     wrappedBy: UInt32(clamping: try result.uint(row, 2)), activeAt: try result.uint(row, 3)))
        }
        return snapshot
    }

    /// The keys of `rows`, unwrapped; `known` spares unwrapping those a ring holds already.
    /// A file key of the same id must be the same key: another file opens nothing right.
    static func unwrap(_ rows: [Row], with wrapping: DataKeyWrapping, fileKeys: [DataKey],
                       known: [UInt32: DataKey] = [:]) throws(DataKeyError) -> [DataKey] {
        var keys: [DataKey] = []
        for row in rows {
            if let key = known[row.id] {
                keys.append(key)
                continue
            }
            let key = try wrapping.unwrap(id: row.id, wrappedBy: row.wrappedBy, sealed: row.wrapped)
            if let file = fileKeys.first(where: { $0.id == key.id }), file != key { throw .differs(id: key.id) }
            keys.append(key)
        }
        return keys
    }

    // MARK: blocking (store start, the key commands)

    /// The host's `data-keys` file. `securepush init` makes it; a missing one (a deployment
    /// made by an earlier build) is made only for a database without keys: the first host's
    /// file becomes the deployment's.
    static func fileKeys(_ path: String, on connection: PostgresBlockingConnection) throws(PostgresDataKeyError) -> [DataKey] {
        let read = Result { () throws(DataKeyError) in try DataKeyFile.read(path) }
        guard case .failure(.missing) = read else { return try read.mapError { PostgresDataKeyError.keys($0) }.get() }
        let any = Result { () throws(PostgresError) in try connection.query("SELECT EXISTS (SELECT 1 FROM data_keys)").bool(0, 0) }
        if try any.mapError({ PostgresDataKeyError.database($0) }).get() { throw .keys(.notCopied(path)) }
        return try Result { () throws(DataKeyError) in try DataKeyFile.readOrCreate(path) }.mapError { PostgresDataKeyError.keys($0) }.get()
    }

    /// Copies the file's keys into an empty table, in the caller's transaction: on first
    /// use, the keys that sealed what is stored so far. They seal at once (every host has
    /// the file already). Then links the payloads to the table by the foreign key, NOT VALID
    /// (rows stored so far name keys now in the table; checking them would scan it all
    /// under a lock that holds back every STORE).
    static func importIfEmpty(_ fileKeys: [DataKey], on connection: PostgresBlockingConnection) throws {
        _ = try connection.query("SELECT 1 FROM pg_advisory_xact_lock($1)", [.int64(lock)])
        if try !connection.query("SELECT EXISTS (SELECT 1 FROM data_keys)").bool(0, 0) {
            let wrapping = try DataKeyWrapping(fileKeys: fileKeys)
            for key in fileKeys {
                let (wrappedBy, sealed) = try wrapping.wrap(key)
                _ = try connection.query("""
                    INSERT INTO data_keys (id, wrapped, wrapped_by, added_at, active_at) VALUES ($1, $2, $3, \(nowSQL), 0)
                    """, [.int64(Int64(key.id)), .bytes(sealed), .int64(Int64(wrappedBy))])
            }
        }
        let linked = try connection.query("SELECT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = $1 AND conrelid = 'payloads'::regclass)", [.text(foreignKey)])
        if try !linked.bool(0, 0) {
            try connection.execute("""
                ALTER TABLE payloads ADD CONSTRAINT \(foreignKey) FOREIGN KEY (key_id) REFERENCES data_keys (id) NOT VALID
                """)
        }
    }

    /// Imports the file's keys if the table has none, then reads and unwraps the table.
    static func load(fileKeys: [DataKey], on connection: PostgresBlockingConnection)
        throws(PostgresDataKeyError) -> (keys: [DataKey], snapshot: Snapshot) {
        let snapshot: Snapshot
        do {
            try connection.transaction { try importIfEmpty(fileKeys, on: connection) }
            snapshot = try decode(connection.query(select.sql))
        } catch let error as DataKeyError {
            throw .keys(error)
        } catch let error as PostgresError {
            throw .database(error)
        } catch {
            throw .database(PostgresError(kind: .protocolViolation, message: "\(error)"))
        }
        guard snapshot.current != nil else { throw .keys(.noKeys("the database's data_keys")) }
        let wrapping: DataKeyWrapping
        let keys: [DataKey]
        do throws(DataKeyError) {
            wrapping = try DataKeyWrapping(fileKeys: fileKeys)
            keys = try unwrap(snapshot.rows, with: wrapping, fileKeys: fileKeys)
        } catch {
            throw .keys(error)
        }
        return (keys, snapshot)
    }

    /// Adds a key with the next id, sealing from `activationDelayMs` on (never before a key
    /// added earlier does); returns its id and when it starts to seal.
    static func add(fileKeys: [DataKey], on connection: PostgresBlockingConnection) throws -> (id: UInt32, activeAt: UInt64, nowMs: UInt64) {
        try connection.transaction {
            _ = try connection.query("SELECT 1 FROM pg_advisory_xact_lock($1)", [.int64(lock)])
            let last = try connection.query("SELECT coalesce(max(id), 0), coalesce(max(active_at), 0), \(nowSQL) FROM data_keys")
            let id = try last.uint(0, 0) + 1
            guard id <= UInt64(UInt32.max) else { throw DataKeyError.malformed("data_keys", line: 0) }
            let nowMs = try last.uint(0, 2)
            let activeAt = max(nowMs + activationDelayMs, try last.uint(0, 1) + 1)
            let key = try DataKeyFile.fresh(id: UInt32(id))
            let (wrappedBy, sealed) = try DataKeyWrapping(fileKeys: fileKeys).wrap(key)
            _ = try connection.query("INSERT INTO data_keys (id, wrapped, wrapped_by, added_at, active_at) VALUES ($1, $2, $3, $4, $5)",
                                     [.uint(id), .bytes(sealed), .int64(Int64(wrappedBy)), .uint(nowMs), .uint(activeAt)])
            return (UInt32(id), activeAt, nowMs)
        }
    }

    /// Removes `id` if it has been superseded for `settleMs` by the database's clock; the
    /// foreign key refuses it (23503) while a row uses it, also one committed as this runs.
    /// The settling is decided here, from the database's clock read first (time only moves
    /// on, so the bound is if anything stricter by the time the DELETE runs): the statement
    /// compares with the bound time and computes nothing.
    static func remove(_ id: UInt32, settleMs: UInt64, on connection: PostgresBlockingConnection) throws(PostgresError) -> Bool {
        let result = Result { () throws(PostgresError) in
            let now = try connection.query("SELECT \(nowSQL)").uint(0, 0)
            return try connection.query("""
                DELETE FROM data_keys WHERE id = $1
                AND id < (SELECT max(id) FROM data_keys WHERE active_at <= $2)
                """, [.int64(Int64(id)), .uint(now > settleMs ? now - settleMs : 0)])
        }
        switch result {
        case .success(let deleted): return deleted.affectedRows == 1
        case .failure(let error) where error.sqlState == "23503": return false
        case .failure(let error): throw error
        }
    }

    /// Payload bodies per key id (one scan of the table).
    static func rowsPerKey(on connection: PostgresBlockingConnection) throws -> [UInt32: Int] {
        let result = try connection.query("SELECT key_id, count(*) FROM payloads WHERE key_id IS NOT NULL GROUP BY key_id")
        var rows: [UInt32: Int] = [:]
        for row in result.rows.indices { rows[UInt32(clamping: try result.uint(row, 0))] = Int(try result.uint(row, 1)) }
        return rows
    }
}
