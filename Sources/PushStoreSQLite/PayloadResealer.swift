import CSQLite
import PushStoreLogic
import PushWire

/// Moves payload bodies from older data keys (and from clear text, for rows an earlier
/// build wrote) to the newest key, one small transaction at a time, so that a rotation
/// needs no downtime and an old key can eventually be pruned.
///
/// A pass walks the table once in seq order, a window of at most `window` seqs per step
/// (starting at the next row that exists), up to the last seq there was when the pass
/// began: rows stored after that already carry the newest key. A row that cannot be
/// opened (its key lost) is passed over and counted. The next rotation, or a restart,
/// starts a new pass.
final class PayloadResealer {
    /// Seqs examined per transaction: small enough that a STORE waiting behind it waits little.
    static let window: Int64 = 1024

    private let connection: SQLiteConnection
    private let sealer: PayloadSealer
    private let select: SQLiteStatement
    private let update: SQLiteStatement
    private let nextSeq: SQLiteStatement
    private let lastSeq: SQLiteStatement
    /// The key a finished pass moved everything to; 0 = no pass finished yet.
    private var finishedFor: UInt32 = 0
    private var passFor: UInt32 = 0
    private var cursor: Int64 = 0
    private var passEnd: Int64 = 0
    /// Rows passed over in the current pass because they did not open.
    private(set) var unreadable = 0

    init(connection: SQLiteConnection, sealer: PayloadSealer) throws(SQLiteError) {
        self.connection = connection
        self.sealer = sealer
        select = try connection.prepare("""
            SELECT seq, id_high, id_low, user_id, key_id, body FROM payloads
            WHERE seq >= ?1 AND seq < ?2 AND key_id < ?3
            """)
        update = try connection.prepare("UPDATE payloads SET key_id = ?, body = ? WHERE seq = ?")
        nextSeq = try connection.prepare("SELECT min(seq) FROM payloads WHERE seq > ?")
        lastSeq = try connection.prepare("SELECT coalesce(max(seq), 0) FROM payloads")
    }

    var isPending: Bool { finishedFor != sealer.ring.currentID }

    /// Re-seals one window in its own transaction; true while more remains.
    func step() throws(SQLiteError) -> Bool {
        let current = sealer.ring.currentID
        guard finishedFor != current else { return false }
        let start = (passFor, cursor, passEnd, unreadable)
        try connection.execute("BEGIN IMMEDIATE")
        do throws(SQLiteError) {
            if passFor != current {
                passFor = current
                cursor = 0
                unreadable = 0
                passEnd = try single(lastSeq, [])
            }
            // The next row there is: gaps left by deleted rows cost nothing.
            let from = try single(nextSeq, [.int(cursor)])
            if from == 0 || from > passEnd {
                try connection.execute("COMMIT")
                finishedFor = current
                return false
            }
            let to = from + PayloadResealer.window
            var rows: [(seq: Int64, id: PayloadID, userID: UInt64, keyID: Int64, body: [UInt8])] = []
            try select.bind([.int(from), .int(to), .int(Int64(current))])
            while try select.step() {
                rows.append((select.int(0), PayloadID(high: UInt64(bitPattern: select.int(1)), low: UInt64(bitPattern: select.int(2))),
                             UInt64(bitPattern: select.int(3)), select.int(4), select.blob(5)))
            }
            select.reset()
            for row in rows {
                guard let clear = try? sealer.open(row.body, keyID: UInt32(truncatingIfNeeded: row.keyID), id: row.id, userID: row.userID) else {
                    unreadable += 1
                    continue
                }
                let (keyID, sealed) = try SQLiteError.reporting { () throws(StoreBackendError) in try sealer.seal(clear, id: row.id, userID: row.userID) }
                try update.run([.int(Int64(keyID)), .blob(sealed), .int(row.seq)])
            }
            try connection.execute("COMMIT")
            cursor = to - 1
            return true
        } catch {
            (passFor, cursor, passEnd, unreadable) = start
            select.reset()
            try? connection.execute("ROLLBACK")
            throw error
        }
    }

    private func single(_ statement: SQLiteStatement, _ values: [SQLiteStatement.Value]) throws(SQLiteError) -> Int64 {
        try statement.bind(values)
        defer { statement.reset() }
        return try statement.step() ? statement.int(0) : 0
    }

    /// Re-seals everything now (for `securepush key prune --reseal`); returns the rows
    /// that could not be opened.
    func runToEnd() throws(SQLiteError) -> Int {
        while try step() {}
        return unreadable
    }
}
