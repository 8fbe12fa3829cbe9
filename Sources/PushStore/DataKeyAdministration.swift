import CSQLite
import PushSecurity

/// How many payload bodies one data key seals.
public struct DataKeyUsage: Sendable, Equatable {
    /// 0 stands for bodies an earlier build stored in clear.
    public var keyID: UInt32
    public var rows: Int
    /// Whether the deployment holds this key (the data-keys file on SQLite, the data_keys
    /// table on PostgreSQL); false: those rows cannot be read.
    public var isHeld: Bool
    public var isCurrent: Bool
    /// A key added but not sealing yet (PostgreSQL): how long until it does.
    public var sealsInMs: UInt64? = nil

    /// Every key held and every key id a row names, with its row count, in id order.
    static func merge(held: [UInt32], rows: [UInt32: Int], current: UInt32, sealsInMs: [UInt32: UInt64] = [:]) -> [DataKeyUsage] {
        let heldSet = Set(held)
        return heldSet.union(rows.keys).sorted().map {
            DataKeyUsage(keyID: $0, rows: rows[$0] ?? 0, isHeld: heldSet.contains($0), isCurrent: $0 == current, sealsInMs: sealsInMs[$0])
        }
    }

    /// The rule of `key prune` on either backend: a key held that neither seals now nor
    /// will, and that no row uses. Each backend then removes it only where no row can take
    /// it meanwhile.
    public static func prunable(_ usage: [DataKeyUsage]) -> [UInt32] {
        guard let current = usage.first(where: \.isCurrent)?.keyID else { return [] }
        return usage.filter { $0.isHeld && $0.keyID != 0 && $0.keyID < current && $0.rows == 0 }.map(\.keyID)
    }
}

/// A key `rotate` added.
public struct DataKeyRotation: Sendable, Equatable {
    public var keyID: UInt32
    /// How long until stores seal under it: 0 on SQLite (each store's next write), the
    /// activation delay on PostgreSQL.
    public var sealsInMs: UInt64
}

/// `securepush key` on either backend.
public protocol DataKeyAdministering: AnyObject {
    /// Adds a key for new writes; running stores seal under it soon and re-seal older rows
    /// in the background.
    func rotate() throws -> DataKeyRotation
    /// Every key held and every key id a row names, with its row count.
    func usage() throws -> [DataKeyUsage]
    /// Re-seals every row under the current key now; returns the rows that could not be opened.
    func resealAll() throws -> Int
    /// Removes the keys `DataKeyUsage.prunable` names, where that is safe; returns their ids.
    func prune() throws -> [UInt32]
}

/// `securepush key` on SQLite: the data-keys file is the deployment's keys.
/// Safe beside a running store: rotation only adds a key, and pruning holds the database's
/// write lock while it removes keys no row uses, which is the lock the store's writer
/// takes before it looks for a new key and seals anything.
public final class DataKeyAdministration: DataKeyAdministering {
    private let connection: SQLiteConnection
    private let sealer: PayloadSealer
    public let keysPath: String

    public init(databasePath: String) throws(SQLiteError) {
        connection = try SQLitePayloadDatabase.open(path: databasePath)
        sealer = try PayloadSealer(databasePath: databasePath)
        keysPath = StoreFiles.dataKeysPath(forDatabase: databasePath)
    }

    /// Adds a key for new writes; a running store notices it within a second (see
    /// `GroupCommitWriter`) and re-seals older rows in the background.
    public func rotate() throws -> DataKeyRotation {
        let key = try DataKeyFile.add(keysPath)
        try sealer.ring.refreshIfChanged()
        return DataKeyRotation(keyID: key.id, sealsInMs: 0)
    }

    /// Every key in the file and every key id a row names, with its row count.
    public func usage() throws -> [DataKeyUsage] {
        _ = try? sealer.ring.refreshIfChanged()
        return DataKeyUsage.merge(held: sealer.ring.keyIDs, rows: try rowsPerKey(), current: sealer.ring.currentID)
    }

    /// Re-seals every row not under the newest key now, instead of leaving it to a running
    /// store; returns the rows that could not be opened.
    public func resealAll() throws -> Int {
        try PayloadResealer(connection: connection, sealer: sealer).runToEnd()
    }

    /// Removes from the file every key but the newest that no row uses; returns their ids.
    /// The rows are counted (one scan of the table) while holding the write lock, so no row
    /// can take a key being removed.
    public func prune() throws -> [UInt32] {
        try UserTable.transaction(connection) { () throws(SQLiteError) -> [UInt32] in
            _ = try? sealer.ring.refreshIfChanged()
            let removable = Set(DataKeyUsage.prunable(DataKeyUsage.merge(held: sealer.ring.keyIDs, rows: try rowsPerKey(),
                                                                         current: sealer.ring.currentID)))
            do {
                return try DataKeyFile.remove(keysPath) { removable.contains($0.id) }
            } catch {
                throw SQLiteError(code: 0, message: "data keys: \(error)")
            }
        }
    }

    private func rowsPerKey() throws(SQLiteError) -> [UInt32: Int] {
        let statement = try connection.prepare("SELECT key_id, count(*) FROM payloads WHERE key_id IS NOT NULL GROUP BY key_id", persistent: false)
        try statement.bind([])
        var rows: [UInt32: Int] = [:]
        while try statement.step() { rows[UInt32(truncatingIfNeeded: statement.int(0))] = Int(statement.int(1)) }
        return rows
    }
}
