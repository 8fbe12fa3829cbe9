import PushEventLoop
import PushSecurity
import PushService

/// A push gateway on one or more loop threads (`--loops`): the caller's loop runs the
/// first, which binds the listening sockets; each other loop runs on a thread of its own,
/// accepts on the same sockets, and serves the devices whose home it is (see
/// `LoopPlacement`). With one loop it is exactly a `GatewayService`.
///
/// Start, drain and read it on the caller's loop.
public final class GatewayLoops {
    public let first: GatewayService
    private let router: GatewayLoopRouter?
    private let others: [OtherLoop]
    private let readinessBoard: LoopReadinessBoard

    /// A loop on a thread of its own, and its service, kept alive until shutdown.
    private typealias OtherLoop = ServiceLoopThread<GatewayService>

    private init(first: GatewayService, router: GatewayLoopRouter?, others: [OtherLoop], readinessBoard: LoopReadinessBoard) {
        self.first = first
        self.router = router
        self.others = others
        self.readinessBoard = readinessBoard
    }

    /// Loop threads serving, the caller's included.
    public var loopCount: Int { others.count + 1 }
    public var port: Int { first.port }
    public var listeningAddresses: [String] { first.listeningAddresses }

    public static func start(_ configuration: GatewayConfiguration, on loop: EventLoop) throws(GatewayServiceError) -> GatewayLoops {
        try configuration.validate()
        let count = configuration.effectiveLoopCount
        guard count > 1 else {
            return GatewayLoops(first: try GatewayService.start(configuration, on: loop), router: nil, others: [],
                                readinessBoard: LoopReadinessBoard())
        }
        let router = GatewayLoopRouter(count: count)
        let readinessBoard = LoopReadinessBoard()
        let admission = AdmissionGate(limits: configuration.limits)
        let replays = CredentialReplayGuard()
        let first = try GatewayService.start(configuration.shard(0, of: count, router: router, listening: nil, admission: admission,
                                                                 replays: replays), on: loop)
        var others: [OtherLoop] = []
        let listening: SharedListenSockets
        do {
            listening = try first.shareListener()
        } catch {
            first.stop()
            throw .cannotListen(host: configuration.host, port: first.port, error)
        }
        for index in 1..<count {
            let shard = configuration.shard(index, of: count, router: router, listening: listening, admission: admission,
                                            replays: replays)
            do {
                others.append(try startOther(shard, index: index, board: readinessBoard))
            } catch {
                for other in others { other.thread.shutdown() }
                first.stop()
                throw error
            }
        }
        return GatewayLoops(first: first, router: router, others: others, readinessBoard: readinessBoard)
    }

    private static func startOther(_ configuration: GatewayConfiguration, index: Int, board: LoopReadinessBoard)
        throws(GatewayServiceError) -> OtherLoop {
        try OtherLoop.start(name: "gateway-\(index)", index: index,
                            start: { loop throws(GatewayServiceError) in try GatewayService.start(configuration, on: loop) },
                            metrics: { $0.metrics }, readiness: { $0.readiness() }, board: board,
                            cannotStart: { .invalidConfiguration($0) })
    }

    /// Ready when every loop is: the first's own checks, every loop's registry loaded (known
    /// the moment it is), and what each other loop last reported of its own checks.
    public func readiness() -> Readiness {
        let readiness = first.readiness()
        guard readiness == .ready else { return readiness }
        if let router, !router.allRegistriesLoaded { return .notReady("loading the device registry from the store") }
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

    /// Graceful stop of every loop ([5.5-1]); `drained` runs on the caller's loop once all
    /// have drained. Then `shutdown()` ends the other threads.
    public func drain(then drained: @escaping () -> Void) {
        OtherLoop.drainAll(others, on: first.loop, drainFirst: { first.drain(then: $0) }, drain: { $0.drain(then: $1) }, then: drained)
    }

    /// Stops the other loops' threads (after `drain`, or at once); the caller's loop is
    /// the caller's to stop. Idempotent.
    public func shutdown() {
        for (offset, other) in others.enumerated() {
            router?.unregister(index: offset + 1)
            other.thread.shutdown()
            readinessBoard.remove(loop: offset + 1)
        }
    }
}
