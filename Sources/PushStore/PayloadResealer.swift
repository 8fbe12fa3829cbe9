import CSQLite
import PushWire

/// Moves payload bodies from older data keys (and from clear text, for rows an earlier
/// build wrote) to the newest key, one small transaction at a time, so that a rotation
/// needs no downtime and an old key can eventually be pruned.
///
/// The rows are walked in (key_id, seq) order through the `payloads_by_key` index with a
/// cursor, so a row that cannot be opened (its key lost) is passed over instead of being
/// picked again forever. A pass ends when a batch comes back short; the next rotation (or
/// a restart) starts a new one.
final class PayloadResealer {
    /// Rows per transaction: small enough that a STORE waiting behind it waits little.
    static let batchSize = 256

    private let connection: SQLiteConnection
    private let sealer: PayloadSealer
    private let select: SQLiteStatement
    private let update: SQLiteStatement
    /// The key a finished pass moved everything to; 0 = no pass finished yet.
    private var finishedFor: UInt32 = 0
    private var passFor: UInt32 = 0
    private var cursor: (keyID: Int64, seq: Int64) = (-1, 0)
    /// Rows passed over in the current pass because they did not open.
    private(set) var unreadable = 0

    init(connection: SQLiteConnection, sealer: PayloadSealer) throws(SQLiteError) {
        self.connection = connection
        self.sealer = sealer
        select = try connection.prepare("""
            SELECT seq, id_high, id_low, user_id, key_id, body FROM payloads
            WHERE key_id < ?1 AND (key_id > ?2 OR (key_id = ?2 AND seq > ?3))
            ORDER BY key_id, seq LIMIT ?4
            """)
        update = try connection.prepare("UPDATE payloads SET key_id = ?, body = ? WHERE seq = ?")
    }

    var isPending: Bool { finishedFor != sealer.ring.currentID }

    /// Re-seals one batch in its own transaction; true while more remains.
    func step() throws(SQLiteError) -> Bool {
        let current = sealer.ring.currentID
        guard finishedFor != current else { return false }
        if passFor != current {
            passFor = current
            cursor = (-1, 0)
            unreadable = 0
        }
        let start = cursor
        try connection.execute("BEGIN IMMEDIATE")
        var count = 0
        do {
            var rows: [(seq: Int64, id: PayloadID, userID: UInt64, keyID: Int64, body: [UInt8])] = []
            try select.bind([.int(Int64(current)), .int(cursor.keyID), .int(cursor.seq), .int(Int64(PayloadResealer.batchSize))])
            while try select.step() {
                rows.append((select.int(0), PayloadID(high: UInt64(bitPattern: select.int(1)), low: UInt64(bitPattern: select.int(2))),
                             UInt64(bitPattern: select.int(3)), select.int(4), select.blob(5)))
            }
            select.reset()
            count = rows.count
            for row in rows {
                cursor = (row.keyID, row.seq)
                guard let clear = try? sealer.open(row.body, keyID: UInt32(truncatingIfNeeded: row.keyID), id: row.id, userID: row.userID) else {
                    unreadable += 1
                    continue
                }
                let (keyID, sealed) = try sealer.seal(clear, id: row.id, userID: row.userID)
                try update.run([.int(Int64(keyID)), .blob(sealed), .int(row.seq)])
            }
            try connection.execute("COMMIT")
        } catch {
            cursor = start
            select.reset()
            try? connection.execute("ROLLBACK")
            throw error
        }
        if count < PayloadResealer.batchSize {
            finishedFor = current
            return false
        }
        return true
    }

    /// Re-seals everything now (for `securepush key prune --reseal`); returns the rows
    /// that could not be opened.
    func runToEnd() throws(SQLiteError) -> Int {
        while try step() {}
        return unreadable
    }
}
