import Logging
import PushClock
import PushEventLoop
import PushPostgres
import PushSecurity
import PushService

/// One store's ring of the database's data keys, kept up to date on the store's loop: the
/// table read every `PostgresDataKeys.refreshMs` on a read connection, the keys another host
/// added unwrapped with this host's file, and a pass of re-sealing started when one is due.
/// Loop-confined, like the ring.
final class PostgresStoreKeys {
    let ring: DataKeyRing
    private let fileKeys: [DataKey]
    private let wrapping: DataKeyWrapping
    private var known: [UInt32: DataKey]
    private var timer: LoopTimer?
    private var refreshing = false
    private var resealer: PostgresResealer?
    private var problemLog = LogThrottle(intervalMs: 10_000)
    /// Why the keys last read could not be used (this host's data-keys file differs).
    private(set) var problem: String?

    /// Imports the host's file into a database without keys, then reads the table.
    init(path: String, on connection: PostgresBlockingConnection) throws(PostgresDataKeyError) {
        let fileKeys = try PostgresDataKeys.fileKeys(path, on: connection)
        let loaded = try PostgresDataKeys.load(fileKeys: fileKeys, on: connection)
        self.fileKeys = fileKeys
        wrapping = try PostgresStoreKeys.keys { () throws(DataKeyError) in try DataKeyWrapping(fileKeys: fileKeys) }
        ring = try PostgresStoreKeys.keys { () throws(DataKeyError) in
            guard let current = loaded.snapshot.current else { throw .noKeys("the database's data_keys") }
            return try DataKeyRing(keys: loaded.keys, current: current)
        }
        known = Dictionary(loaded.keys.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
    }

    private static func keys<T>(_ body: () throws(DataKeyError) -> T) throws(PostgresDataKeyError) -> T {
        do throws(DataKeyError) { return try body() } catch { throw .keys(error) }
    }

    /// Starts reading the table on `loop`, over the connection `readLink` names each time;
    /// re-sealing passes go over `resealer`'s connection.
    func follow(on loop: EventLoop, readLink: @escaping () -> PostgresLink, resealer: PostgresResealer, logger: Logger) {
        self.resealer = resealer
        timer = loop.schedule(after: .milliseconds(PostgresDataKeys.refreshMs), repeating: true) { [weak self] in
            self?.refresh(readLink(), logger: logger)
        }
    }

    func stop() {
        timer?.cancel()
        timer = nil
    }

    deinit { timer?.cancel() }

    private func refresh(_ link: PostgresLink, logger: Logger) {
        guard !refreshing else { return }
        refreshing = true
        link.use { [weak self] connection, _ in
            guard let connection else {
                self?.refreshing = false
                return
            }
            connection.query(PostgresDataKeys.select) { [weak self] result in
                guard let self else { return }
                refreshing = false
                // A database that is down is the readiness check's to report.
                guard case .success(let rows) = result, let snapshot = try? PostgresDataKeys.decode(rows) else { return }
                do throws(DataKeyError) {
                    try install(snapshot)
                    problem = nil
                } catch {
                    problem = "\(error)"
                    if problemLog.event(nowMs: Clocks.monotonicMilliseconds()) != nil {
                        logger.error("cannot use the database's data keys", metadata: ["error": "\(error)"])
                    }
                }
                if snapshot.resealDue, snapshot.current == ring.currentID { resealer?.startIfFree() }
            }
        }
    }

    /// The keys of `snapshot` into the ring, its current key sealing from now on. Throws,
    /// changing nothing, if a key does not open with this host's file.
    func install(_ snapshot: PostgresDataKeys.Snapshot) throws(DataKeyError) {
        let keys = try PostgresDataKeys.unwrap(snapshot.rows, with: wrapping, fileKeys: fileKeys, known: known)
        guard let current = snapshot.current else { throw .noKeys("the database's data_keys") }
        try ring.install(keys, current: current)
        known = Dictionary(keys.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
    }
}
