import PushEventLoop
import PushPostgres
import PushStoreLogic
import PushWire

/// Moves payload bodies on PostgreSQL from older data keys to the current one, so that
/// an old key can be pruned. One store of the database at a time does it: the one whose
/// write connection holds the session advisory lock `lock` (a store that dies lets it go
/// with its connection). It walks the table in seq order, `batch` rows a statement, each
/// batch read without locks and written back by one UPDATE that changes a row only if it
/// is still under the key it was read with: a row erased meanwhile (read out, recalled,
/// expired: its key_id is NULL) or deleted stays so, and no transaction spans the work in
/// between, so no STORE, ACK or sweep waits on more than one short UPDATE.
///
/// A pass for a key begins once every store seals under it (`PostgresDataKeys.settleMs`
/// after it became current): rows stored before are then all in the walk's path. When it
/// ends, `data_key_reseal.key_id` says so to every store, and none starts another.
/// Loop-confined.
final class PostgresResealer {
    static let batch = 256
    /// `pg_try_advisory_lock` key ("sp-resea").
    static let lock: Int64 = 0x7370_2D72_6573_6561
    /// Pause between batches, so that the store's own groups go between them.
    static let pauseMs = 5

    /// Whether a store of the database holds `lock`: a pass runs (pg_locks shows a bigint
    /// advisory lock as its high and low 32 bits, in classid and objid).
    static func isRunning(on connection: PostgresBlockingConnection) throws -> Bool {
        try connection.query("""
            SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
            AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
            AND classid::bigint = $1 AND objid::bigint = $2)
            """, [.int64(lock >> 32), .int64(lock & 0xFFFF_FFFF)]).bool(0, 0)
    }

    let link: PostgresLink
    private let loop: EventLoop
    private let sealer: PayloadSealer
    private(set) var running = false
    /// Rows passed over because they did not open (their key lost), in the last pass.
    private(set) var unreadable = 0
    var onError: ((PostgresError) -> Void)?

    init(link: PostgresLink, loop: EventLoop, sealer: PayloadSealer) {
        self.link = link
        self.loop = loop
        self.sealer = sealer
    }

    /// Starts a pass for the ring's current key if the lock is free.
    func startIfFree() {
        guard !running else { return }
        running = true
        let target = sealer.ring.currentID
        link.use { [weak self] connection, _ in
            guard let self else { return }
            guard let connection else {
                running = false
                return
            }
            connection.query("SELECT pg_try_advisory_lock($1)", [.int64(PostgresResealer.lock)]) { [weak self] result in
                guard let self else { return }
                guard case .success(let rows) = result, (try? rows.bool(0, 0)) == true else {
                    running = false
                    return
                }
                unreadable = 0
                step(after: 0, target: target, on: connection)
            }
        }
    }

    private func step(after cursor: UInt64, target: UInt32, on connection: PostgresConnection) {
        // Another rotation: this pass is for a key no longer current.
        guard sealer.ring.currentID == target else { return finish(on: connection, done: nil) }
        connection.query(PostgresResealer.select(after: cursor, below: target)) { [weak self] result in
            guard let self else { return }
            switch result {
            case .failure(let error): fail(error, on: connection)
            case .success(let rows):
                do throws(PostgresError) {
                    let read = try PostgresResealer.decode(rows)
                    let (resealed, unopened) = PostgresResealer.reseal(read, with: sealer)
                    unreadable += unopened
                    let next = read.last?.seq ?? cursor
                    let more = read.count == PostgresResealer.batch
                    let proceed = { [weak self] in
                        guard let self else { return }
                        guard more else { return finish(on: connection, done: target) }
                        loop.schedule(after: .milliseconds(PostgresResealer.pauseMs)) { [weak self] in
                            self?.step(after: next, target: target, on: connection)
                        }
                    }
                    guard !resealed.isEmpty else { return proceed() }
                    connection.query(PostgresResealer.update(resealed)) { [weak self] result in
                        if case .failure(let error) = result { self?.fail(error, on: connection) } else { proceed() }
                    }
                } catch {
                    fail(error, on: connection)
                }
            }
        }
    }

    private func fail(_ error: PostgresError, on connection: PostgresConnection) {
        onError?(error)
        finish(on: connection, done: nil)
    }

    /// Lets the lock go; with `done`, first records that the pass for that key is over.
    private func finish(on connection: PostgresConnection, done: UInt32?) {
        let unlock = { [weak self] in
            connection.query("SELECT pg_advisory_unlock($1)", [.int64(PostgresResealer.lock)]) { _ in self?.running = false }
        }
        guard let done else { return unlock() }
        // Read and written under the lock, which every writer of the marker holds.
        connection.query("SELECT key_id FROM data_key_reseal WHERE id = 1") { result in
            let held = (try? result.get().uint(0, 0)).map { UInt32(clamping: $0) } ?? 0
            connection.query("UPDATE data_key_reseal SET key_id = $1 WHERE id = 1",
                             [.int64(Int64(PostgresResealer.marker(held: held, finished: done)))]) { _ in unlock() }
        }
    }

    /// The key `data_key_reseal` names once a pass for `finished` is over: the newest key a
    /// pass was finished for, never moved back by a pass for an older one (a store that had
    /// not yet seen a rotation).
    static func marker(held: UInt32, finished: UInt32) -> UInt32 { max(held, finished) }

    // MARK: shared with `key prune --reseal`

    struct Row {
        var seq: UInt64
        var id: PayloadID
        var userID: UInt64
        var keyID: UInt32
        var body: [UInt8]
    }

    struct Resealed {
        var seq: UInt64
        var oldKey: UInt32
        var newKey: UInt32
        var body: [UInt8]
    }

    /// The next batch after `cursor` under a key older than `target`, in seq order.
    static func select(after cursor: UInt64, below target: UInt32) -> PostgresStatement {
        PostgresStatement("""
            SELECT seq, id, user_id, key_id, body FROM payloads WHERE seq > $1 AND key_id < $2 ORDER BY seq LIMIT $3
            """, [.uint(cursor), .int64(Int64(target)), .int(batch)], prepared: true)
    }

    static func decode(_ rows: PostgresResult) throws(PostgresError) -> [Row] {
        try rows.rows.indices.map { (row) throws(PostgresError) in
            Row(seq: try rows.uint(row, 0), id: try rows.payloadID(row, 1), userID: try rows.uint(row, 2),
                keyID: UInt32(clamping: try rows.uint(row, 3)), body: try rows.bytes(row, 4))
        }
    }

    /// Each row opened and sealed again under the current key; the count that did not open.
    static func reseal(_ rows: [Row], with sealer: PayloadSealer) -> ([Resealed], unreadable: Int) {
        var resealed: [Resealed] = []
        var unreadable = 0
        for row in rows {
            guard let clear = try? sealer.open(row.body, keyID: row.keyID, id: row.id, userID: row.userID),
                  let (keyID, sealed) = try? sealer.seal(clear, id: row.id, userID: row.userID), keyID > row.keyID else {
                unreadable += 1
                continue
            }
            resealed.append(Resealed(seq: row.seq, oldKey: row.keyID, newKey: keyID, body: sealed))
        }
        return (resealed, unreadable)
    }

    /// The bodies written back, each only if its row is still under the key it was read
    /// with; rows locked in seq order, like every other statement that locks several.
    static func update(_ rows: [Resealed]) -> PostgresStatement {
        PostgresStatement("""
            WITH v AS (SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bytea[]) AS v (seq, old_key, new_key, body)),
                 l AS (SELECT p.seq FROM payloads p JOIN v ON v.seq = p.seq WHERE p.key_id = v.old_key ORDER BY p.seq FOR UPDATE OF p)
            UPDATE payloads p SET key_id = v.new_key, body = v.body FROM v
            WHERE p.seq = v.seq AND p.seq IN (SELECT seq FROM l) AND p.key_id = v.old_key
            """, [.int64Array(rows.map { Int64(clamping: $0.seq) }), .int64Array(rows.map { Int64($0.oldKey) }),
                  .int64Array(rows.map { Int64($0.newKey) }), .bytesArray(rows.map(\.body))], prepared: true)
    }
}
