#if canImport(Glibc)
import Glibc
#endif
import PushService
import PushStoreLogic
import PushStoreSQLite

/// One loop's place in a store of several: set on its copy of the configuration.
struct StoreShard: Sendable {
    var seat: LoopSeat<StoreService>
    /// The limits, FETCH statistics and credentials seen, for every loop.
    var shared: StoreProcessState
    /// On SQLite, the writer thread and the ID map every loop uses; nil on PostgreSQL,
    /// where each loop has connections of its own.
    var sqlite: SQLiteStoreWriterGroup?
    /// With `http` configured: the HTTP API's cap, sockets and counts, for every loop.
    var http: StoreHTTPShared?
}

extension StoreConfiguration {
    /// A store on one loop, or the first of several: the one that speaks for the others
    /// (logs, pruning, registry and commit-failure counts).
    var speaksForProcess: Bool { shard?.seat.speaksForProcess ?? true }

    var loopIndex: Int { shard?.seat.index ?? 0 }

    /// The name this loop's pushes are owned by on PostgreSQL: the same after a restart of
    /// the store on the same host and address, so it takes its own back at once, and apart
    /// from every other store loop of the database.
    var outboxOwner: String {
        var name = [UInt8](repeating: 0, count: 256)
        let host = gethostname(&name, name.count - 1) == 0 ? String(decoding: name.prefix { $0 != 0 }, as: UTF8.self) : "unknown-host"
        return "\(host)/\(self.host):\(port)/loop \(loopIndex)"
    }

    /// A loop's copy of the configuration: its place in the group.
    func seated(_ shard: StoreShard?) -> StoreConfiguration {
        var copy = self
        copy.shard = shard
        return copy
    }
}
