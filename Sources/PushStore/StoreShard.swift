import PushEventLoop
import PushService

/// One loop's place in a store of several: set on its copy of the configuration.
struct StoreShard: Sendable {
    var index: Int
    /// The first loop's listening sockets, which the other loops accept on too; nil for
    /// the first loop, which binds them.
    var listening: SharedListenSockets?
    /// The process's connection caps, one count for every loop.
    var admission: AdmissionGate
    /// The limits, FETCH statistics and credentials seen, for every loop.
    var shared: StoreProcessState
    /// On SQLite, the writer thread and the ID map every loop uses; nil on PostgreSQL,
    /// where each loop has connections of its own.
    var sqlite: SQLiteStoreWriterGroup?
    /// Which loop each connection is served on.
    var balancer: StoreLoopBalancer
}

extension StoreConfiguration {
    /// A store on one loop, or the first of several: the one that speaks for the others
    /// (logs, pruning, registry and commit-failure counts).
    var isFirstLoop: Bool { (shard?.index ?? 0) == 0 }

    /// Loop `index`'s copy of the configuration: its place in the group.
    func shard(_ index: Int, listening: SharedListenSockets?, admission: AdmissionGate, shared: StoreProcessState,
               sqlite: SQLiteStoreWriterGroup?, balancer: StoreLoopBalancer) -> StoreConfiguration {
        var copy = self
        copy.shard = StoreShard(index: index, listening: listening, admission: admission, shared: shared, sqlite: sqlite,
                                balancer: balancer)
        return copy
    }
}
