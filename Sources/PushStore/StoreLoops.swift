import PushEventLoop
import PushService

/// A payload store on one or more loop threads (`--loops`): the caller's loop runs the
/// first, which binds the listening sockets; each other loop runs on a thread of its own
/// and accepts on the same sockets. Connections are spread over the loops in turn
/// (`StoreLoopBalancer`), and a loop serves every request of its connections. On SQLite the loops share one writer thread and the map of
/// stored IDs, each reading through a connection of its own; on PostgreSQL each loop has
/// its own connections, as separate stores would. The connection caps, the login and
/// token limits, the FETCH statistics and the credentials seen are one per process
/// (`StoreProcessState`). With one loop it is exactly a `StoreService`.
///
/// Start, drain and read it on the caller's loop.
public final class StoreLoops {
    public let first: StoreService
    private let others: [OtherLoop]
    private let writerGroup: SQLiteStoreWriterGroup?
    private let balancer: StoreLoopBalancer?
    private let readinessBoard: LoopReadinessBoard

    /// A loop on a thread of its own, and its service, kept alive until shutdown.
    private typealias OtherLoop = ServiceLoopThread<StoreService>

    private init(first: StoreService, others: [OtherLoop], writerGroup: SQLiteStoreWriterGroup?, balancer: StoreLoopBalancer?,
                 readinessBoard: LoopReadinessBoard) {
        self.first = first
        self.readinessBoard = readinessBoard
        self.others = others
        self.writerGroup = writerGroup
        self.balancer = balancer
    }

    /// Loop threads serving, the caller's included.
    public var loopCount: Int { others.count + 1 }
    public var port: Int { first.port }
    public var listeningAddresses: [String] { first.listeningAddresses }

    public static func start(_ configuration: StoreConfiguration, on loop: EventLoop) throws(StoreServiceError) -> StoreLoops {
        _ = try configuration.effectiveLimits()
        let count = configuration.effectiveLoopCount
        guard count > 1 else {
            return StoreLoops(first: try StoreService.start(configuration, on: loop), others: [], writerGroup: nil, balancer: nil,
                              readinessBoard: LoopReadinessBoard())
        }
        var writerGroup: SQLiteStoreWriterGroup?
        if configuration.database == nil {
            do {
                writerGroup = try SQLiteStoreWriterGroup.start(path: configuration.databasePath, settings: configuration.settings,
                                                               clock: configuration.clock, loopCount: count)
            } catch {
                throw .cannotStartSQLite(error)
            }
        }
        let admission = AdmissionGate(limits: configuration.limits)
        let shared = StoreProcessState(settings: configuration.settings)
        let balancer = StoreLoopBalancer(count: count)
        let readinessBoard = LoopReadinessBoard()
        let first: StoreService
        do {
            first = try StoreService.start(configuration.shard(0, listening: nil, admission: admission, shared: shared, sqlite: writerGroup,
                                                               balancer: balancer),
                                           on: loop)
        } catch {
            writerGroup?.stop()
            throw error
        }
        var others: [OtherLoop] = []
        let listening: SharedListenSockets
        do {
            listening = try first.shareListener()
        } catch {
            first.stop()
            writerGroup?.stop()
            throw .cannotListen(host: configuration.host, port: first.port, error)
        }
        for index in 1..<count {
            let shard = configuration.shard(index, listening: listening, admission: admission, shared: shared, sqlite: writerGroup,
                                            balancer: balancer)
            do {
                others.append(try startOther(shard, index: index, board: readinessBoard))
            } catch {
                for other in others { other.thread.shutdown() }
                first.stop()
                writerGroup?.stop()
                throw error
            }
        }
        return StoreLoops(first: first, others: others, writerGroup: writerGroup, balancer: balancer, readinessBoard: readinessBoard)
    }

    private static func startOther(_ configuration: StoreConfiguration, index: Int, board: LoopReadinessBoard)
        throws(StoreServiceError) -> OtherLoop {
        try OtherLoop.start(name: "store-\(index)", index: index,
                            start: { loop throws(StoreServiceError) in try StoreService.start(configuration, on: loop) },
                            metrics: { $0.metrics }, readiness: { $0.readiness() }, board: board,
                            cannotStart: { .invalidConfiguration($0) })
    }

    /// Ready when every loop is: the first loop's checks, then what each other loop last
    /// reported of its own (on PostgreSQL, each loop's connections to the database).
    public func readiness() -> Readiness {
        let readiness = first.readiness()
        guard readiness == .ready else { return readiness }
        return readinessBoard.readiness()
    }

    /// /metrics, /healthz and /readyz on the first loop, with the metrics of every loop summed.
    public func startMonitoring(host address: String, port: Int) throws(EventLoopError) -> MonitoringEndpoint {
        try MonitoringEndpoint(loop: first.loop, host: address, port: port, metrics: first.metrics,
                               others: others.map(\.metrics)) { [weak self] in
            self?.readiness() ?? .notReady("stopped")
        }
    }

    /// The first loop's metrics registry: add process and build metrics here.
    public var metrics: MetricsRegistry { first.metrics }

    /// Graceful stop of every loop ([5.5-1]): each answers what it accepted; then the
    /// shared writer commits what it holds and stops, and `drained` runs on the caller's
    /// loop. Then `shutdown()` ends the other threads.
    public func drain(then drained: @escaping () -> Void) {
        let writerGroup = self.writerGroup
        OtherLoop.drainAll(others, on: first.loop, drainFirst: { first.drain(then: $0) }, drain: { $0.drain(then: $1) }) {
            writerGroup?.stop()
            drained()
        }
    }

    /// Stops the other loops' threads (after `drain`, or at once) and the shared writer;
    /// the caller's loop is the caller's to stop. Idempotent.
    public func shutdown() {
        for (offset, other) in others.enumerated() {
            balancer?.unregister(index: offset + 1)
            other.thread.shutdown()
            readinessBoard.remove(loop: offset + 1)
        }
        writerGroup?.stop()
    }
}
