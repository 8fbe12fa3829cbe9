import PushPostgres
import PushSecurity
import PushStoreLogic

/// `securepush key` on PostgreSQL, from any store host's deployment directory: the keys
/// are the database's (`PostgresDataKeys`), opened with this host's `data-keys` file, and
/// every running store takes in a change within a second. Safe beside running stores:
/// rotation adds a key that seals only once every store has read it; pruning removes only
/// keys superseded for `PostgresDataKeys.settleMs`, and the foreign key from the payloads
/// refuses the removal of any key a row uses, committed before or while it runs.
public final class PostgresDataKeyAdministration: DataKeyAdministering {
    /// How long after `rotate` a new key seals, and how long after it superseded the key
    /// before re-sealing begins and `prune` may remove the old one (for help texts).
    public static let activationDelayMs = PostgresDataKeys.activationDelayMs
    public static let settleMs = PostgresDataKeys.settleMs

    private let connection: PostgresBlockingConnection
    private let fileKeys: [DataKey]
    public let database: String

    /// Connects, brings the schema up to date and imports the file's keys into a database
    /// that has none yet.
    public init(url: String, dataKeysPath: String) throws {
        let admin = try PostgresAdministration(url: url)
        admin.close()
        database = admin.database
        connection = try PostgresBlockingConnection(url)
        fileKeys = try PostgresDataKeys.fileKeys(dataKeysPath, on: connection)
        _ = try PostgresDataKeys.load(fileKeys: fileKeys, on: connection)
    }

    deinit { connection.close() }

    public func rotate() throws -> DataKeyRotation {
        let added = try PostgresDataKeys.add(fileKeys: fileKeys, on: connection)
        return DataKeyRotation(keyID: added.id, sealsInMs: added.activeAt > added.nowMs ? added.activeAt - added.nowMs : 0)
    }

    public func usage() throws -> [DataKeyUsage] {
        let snapshot = try PostgresDataKeys.decode(connection.query(PostgresDataKeys.select.sql))
        var pending: [UInt32: UInt64] = [:]
        var superseded: [UInt32: UInt64] = [:]
        for row in snapshot.rows {
            if row.activeAt > snapshot.nowMs { pending[row.id] = row.activeAt - snapshot.nowMs }
            // A newer key sealing since this long: the first to begin after it.
            let newer = snapshot.rows.filter { $0.id > row.id && $0.activeAt <= snapshot.nowMs }.map(\.activeAt).min()
            if let newer { superseded[row.id] = snapshot.nowMs - newer }
        }
        return DataKeyUsage.merge(held: snapshot.rows.map(\.id), rows: try PostgresDataKeys.rowsPerKey(on: connection),
                                  current: snapshot.current ?? 0, sealsInMs: pending, supersededAgoMs: superseded)
    }

    public var settleMs: UInt64 { PostgresDataKeys.settleMs }

    /// From the table's clock and pass marker, and whether a store holds the re-sealing lock.
    public func resealing() throws -> DataKeyResealing {
        let snapshot = try PostgresDataKeys.decode(connection.query(PostgresDataKeys.select.sql))
        guard let current = snapshot.current, let row = snapshot.rows.first(where: { $0.id == current }) else { return .due }
        if row.activeAt + PostgresDataKeys.settleMs > snapshot.nowMs { return .startsIn(ms: row.activeAt + PostgresDataKeys.settleMs - snapshot.nowMs) }
        if try PostgresResealer.isRunning(on: connection) { return .running }
        return snapshot.resealedTo >= current ? .finished : .due
    }

    /// Walks the whole table once, beside any store's pass: each row is written back only
    /// if it is still under the key it was read with.
    public func resealAll() throws -> Int {
        let (keys, snapshot) = try PostgresDataKeys.load(fileKeys: fileKeys, on: connection)
        guard let current = snapshot.current else { return 0 }
        let sealer = PayloadSealer(ring: try DataKeyRing(keys: keys, current: current))
        var cursor: UInt64 = 0
        var unreadable = 0
        while true {
            let select = PostgresResealer.select(after: cursor, below: current)
            let rows = try PostgresResealer.decode(connection.query(select.sql, select.parameters))
            let (resealed, unopened) = PostgresResealer.reseal(rows, with: sealer)
            unreadable += unopened
            if !resealed.isEmpty {
                let update = PostgresResealer.update(resealed)
                _ = try connection.query(update.sql, update.parameters)
            }
            guard let last = rows.last, rows.count == PostgresResealer.batch else { return unreadable }
            cursor = last.seq
        }
    }

    public func prune() throws -> [UInt32] {
        try DataKeyUsage.prunable(usage(), settleMs: settleMs).filter { (id) throws(PostgresError) in
            try PostgresDataKeys.remove(id, settleMs: PostgresDataKeys.settleMs, on: connection)
        }
    }
}
