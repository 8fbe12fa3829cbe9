import CSQLite
import PushSecurity
import PushStoreLogic

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

    /// The store's writer reads the file before it seals anything: a key superseded is
    /// never sealed under again.
    public var settleMs: UInt64 { 0 }

    /// A running store's writer re-seals between its writes; whether one runs is not
    /// known here.
    public func resealing() throws -> DataKeyResealing { .inBackground }

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
