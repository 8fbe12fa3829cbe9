import PushEventLoop
import PushService
import PushStoreLogic
import PushStoreSQLite

/// A payload store on one or more loop threads (`--loops`), as a `ServiceLoopGroup`.
/// Accepted connections are given to the loops in turn (`LoopSeat.spreadingAccepts`), and
/// a loop serves every request of its connections. On SQLite the loops share one writer
/// thread and the map of stored IDs, each reading through a connection of its own; on
/// PostgreSQL each loop has its own connections, as separate stores would. The connection
/// caps, the login and token limits, the FETCH statistics and the credentials seen are one
/// per process (`StoreProcessState`). With one loop it is exactly a `StoreService`.
public typealias StoreLoops = ServiceLoopGroup<StoreService>

extension ServiceLoopGroup where Member == StoreService {
    public static func start(_ configuration: StoreConfiguration, on loop: EventLoop) throws(StoreServiceError) -> StoreLoops {
        _ = try configuration.effectiveLimits()
        let count = configuration.effectiveLoopCount
        let writerGroup = try sharedWriter(configuration, loops: count)
        let shared = StoreProcessState(settings: configuration.settings)
        let http = configuration.http.map { StoreHTTPShared($0) }
        return try start(
            LoopMembers(count: count), name: "store", admission: AdmissionGate(limits: configuration.limits), on: loop,
            member: { seat, loop throws(StoreServiceError) in
                let shard = seat.map { StoreShard(seat: $0, shared: shared, sqlite: writerGroup, http: http) }
                return try StoreService.start(configuration.seated(shard), on: loop)
            },
            release: { writerGroup?.stop() },
            cannotStart: { .invalidConfiguration($0) },
            cannotShare: { .cannotListen(host: configuration.host, port: $1, $0) })
    }

    /// On SQLite with several loops, the one writer thread they share.
    private static func sharedWriter(_ configuration: StoreConfiguration, loops count: Int)
        throws(StoreServiceError) -> SQLiteStoreWriterGroup? {
        guard count > 1, configuration.database == nil else { return nil }
        do {
            return try SQLiteStoreWriterGroup.start(path: configuration.databasePath, settings: configuration.settings,
                                                    clock: configuration.clock, loopCount: count)
        } catch {
            throw .cannotStartSQLite(error)
        }
    }
}
