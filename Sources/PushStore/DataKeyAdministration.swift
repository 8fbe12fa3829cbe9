import CSQLite
import PushSecurity

/// How many payload bodies one data key seals.
public struct DataKeyUsage: Sendable, Equatable {
    /// 0 stands for bodies an earlier build stored in clear.
    public var keyID: UInt32
    public var rows: Int
    /// Whether the data keys file holds this key (false: those rows cannot be read).
    public var inFile: Bool
    public var isCurrent: Bool
}

/// `securepush key`: rotating, inspecting and pruning the data keys that seal payloads.
/// Safe beside a running store: rotation only adds a key, and pruning holds the database's
/// write lock while it removes keys no row uses, which is the lock the store's writer
/// takes before it looks for a new key and seals anything.
public final class DataKeyAdministration {
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
    public func rotate() throws(DataKeyError) -> UInt32 {
        let key = try DataKeyFile.add(keysPath)
        try sealer.ring.refreshIfChanged()
        return key.id
    }

    /// Every key in the file and every key id a row names, with its row count.
    public func usage() throws(SQLiteError) -> [DataKeyUsage] {
        _ = try? sealer.ring.refreshIfChanged()
        let rows = try rowsPerKey()
        let inFile = Set(sealer.ring.keyIDs)
        return inFile.union(rows.keys).sorted().map {
            DataKeyUsage(keyID: $0, rows: rows[$0] ?? 0, inFile: inFile.contains($0), isCurrent: $0 == sealer.ring.currentID)
        }
    }

    /// Re-seals every row not under the newest key now, instead of leaving it to a running
    /// store; returns the rows that could not be opened.
    public func resealAll() throws(SQLiteError) -> Int {
        try PayloadResealer(connection: connection, sealer: sealer).runToEnd()
    }

    /// Removes from the file every key but the newest that no row uses; returns their ids.
    /// The rows are counted (one scan of the table) while holding the write lock, so no row
    /// can take a key being removed.
    public func prune() throws -> [UInt32] {
        try UserTable.transaction(connection) { () throws(SQLiteError) -> [UInt32] in
            let used = try rowsPerKey()
            do {
                return try DataKeyFile.remove(keysPath) { used[$0.id, default: 0] == 0 }
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
