import PushEventLoop
import PushNATS
import PushSecurity
import PushService
import PushSession

/// Why a gateway did not start.
public enum GatewayServiceError: Error, CustomStringConvertible {
    case invalidConfiguration(String)
    case cannotListen(host: String, port: Int, EventLoopError)
    case cannotJoinCluster(String)

    public var description: String {
        switch self {
        case .invalidConfiguration(let text): "invalid gateway configuration: \(text)"
        case .cannotListen(let host, let port, let error): "cannot listen on \(host):\(port): \(error)"
        case .cannotJoinCluster(let text): "cannot join the cluster: \(text)"
        }
    }
}

/// A running push gateway: routing, offline queues and fan-out behind one listener.
/// Loop-confined; start, drain and stop it on its loop.
///
/// Keep the service until its loop has shut down: the loop's timers and listener call
/// into it for as long as the loop runs.
public final class GatewayService: LoopGroupMember {
    public let configuration: GatewayConfiguration
    /// The port it listens on (the one picked when the configuration said 0).
    public let port: Int
    private let host: ServiceHost<GatewayServer>
    /// Every address it listens on, as HOST:PORT.
    public var listeningAddresses: [String] { host.listeningAddresses }
    let server: GatewayServer
    /// Reads the store's device registry, when the gateway follows one.
    public let follower: RegistryFollower?
    /// The gateway's part in a cluster, when it is a node of one.
    let cluster: GatewayCluster?

    private init(configuration: GatewayConfiguration, port: Int, host: ServiceHost<GatewayServer>, server: GatewayServer,
                 follower: RegistryFollower?, cluster: GatewayCluster?) {
        self.configuration = configuration
        self.port = port
        self.host = host
        self.server = server
        self.follower = follower
        self.cluster = cluster
    }

    public static func start(_ configuration: GatewayConfiguration, on loop: EventLoop) throws(GatewayServiceError) -> GatewayService {
        try configuration.validate()
        let metrics = GatewayMetrics()
        let logic = GatewayLogic(settings: configuration.settings, serverKey: configuration.serverKey,
                                 metrics: metrics, followsRegistry: configuration.store != nil,
                                 wallClock: configuration.wallClock, monotonicClock: configuration.monotonicClock)
        let server = GatewayServer(loop: loop, limits: configuration.limits, logger: configuration.logger, logic: logic,
                                   providerKey: configuration.providerKey, wallClock: configuration.wallClock,
                                   admission: configuration.shard?.seat.admission,
                                   replays: configuration.shard?.replays ?? CredentialReplayGuard())
        let host = server.host!
        let cluster = try joinCluster(configuration, server: server, loop: loop)
        host.maxOutputBytes = configuration.maxOutputBytes
        host.registerMetrics(in: metrics.registry, prefix: "securepush_gateway",
                             includingSharedCounts: configuration.speaksForProcess,
                             loop: configuration.shard?.seat.index)
        if let shard = configuration.shard {
            shard.join(server, loop: loop, followsRegistry: configuration.store != nil)
        }
        try listen(host, configuration)
        let follower = configuration.store.map { store in
            let follower = RegistryFollower(loop: loop, endpoint: store, serverKey: configuration.serverKey,
                                            wallClock: configuration.wallClock, server: server, logger: configuration.logger)
            follower.waitMs = configuration.registryWaitMs
            return follower
        }
        let service = GatewayService(configuration: configuration, port: host.port ?? configuration.port, host: host, server: server,
                                     follower: follower, cluster: cluster)
        service.announceAndFollow()
        return service
    }

    /// With `--cluster`: this loop's node of the cluster, connected to NATS, whose
    /// decisions the server carries out.
    private static func joinCluster(_ configuration: GatewayConfiguration, server: GatewayServer,
                                    loop: EventLoop) throws(GatewayServiceError) -> GatewayCluster? {
        guard var clusterConfiguration = configuration.cluster else { return nil }
        clusterConfiguration.loop = configuration.shard?.seat.index ?? 0
        let cluster: GatewayCluster
        do {
            cluster = try GatewayCluster(configuration: clusterConfiguration, logic: server.logic, loop: loop,
                                         seal: ClusterSeal(serverKey: configuration.serverKey), placement: configuration.shard?.placement,
                                         logger: configuration.logger)
            try cluster.start()
        } catch {
            throw .cannotJoinCluster("\(error)")
        }
        server.cluster = cluster
        return cluster
    }

    /// Listens on the configured address, or on the socket the process's loops share.
    private static func listen(_ host: ServiceHost<GatewayServer>, _ configuration: GatewayConfiguration) throws(GatewayServiceError) {
        do {
            if let shared = configuration.shard?.seat.listening {
                try host.listen(sharing: shared)
            } else {
                try host.listen(host: configuration.host, port: configuration.port, tls: configuration.tls)
            }
        } catch {
            throw .cannotListen(host: configuration.host, port: configuration.port, error)
        }
    }

    /// Says what the gateway is ready as, and starts following the registry, if any. The
    /// other loops of a gateway of several start quietly: the first speaks for them.
    private func announceAndFollow() {
        guard configuration.speaksForProcess else {
            follower?.start()
            return
        }
        let logger = configuration.logger
        logger.info("gateway ready", metadata: ["listen": "\(configuration.host):\(port)"])
        if let clusterConfiguration = configuration.cluster {
            logger.info("node of a cluster: devices may connect to any node, queues are kept in JetStream",
                        metadata: ["node": "\(clusterConfiguration.node)", "nats": "\(NATSNames.redacted(clusterConfiguration.servers))",
                                   "nats_tls": "\(clusterConfiguration.security.tls != nil)"])
        }
        if let follower {
            logger.info("following the device registry of the store; device HELLOs get BUSY until it is loaded",
                        metadata: ["store": "\(follower.endpoint)", "tls": "\(follower.endpoint.tls != nil)"])
            follower.start()
        } else {
            logger.info("""
                not following a device registry (no --store): any registration signed with the server key is accepted \
                and pushes reach only devices that connected since the start; for tests and development
                """)
        }
    }

    /// Routing state: the devices known, online or queued for. Loop-confined.
    public var logic: GatewayLogic { server.logic }

    /// The loop it runs on.
    public var loop: EventLoop { host.loop }

    /// Open client connections.
    public var connectionCount: Int { host.connectionCount }
    /// What another loop needs to accept on this gateway's listening sockets too.
    public func shareListener() throws(EventLoopError) -> SharedListenSockets { try host.shareListener() }

    /// Serves a connection another loop accepted and placed here. The gateway places a
    /// device on its home loop after HELLO, when its id is known, so its loops do not
    /// spread accepts; a socket placed here anyway is served like any other.
    public func takeOver(acceptedSocket fd: Int32) { host.takeOver(acceptedSocket: fd) }
    public var isDraining: Bool { host.isDraining }

    /// The gateway's metrics; add process and build metrics to it before serving it.
    public var metrics: MetricsRegistry { server.logic.metrics.registry }

    /// Ready while listening and not draining, and once the registry is loaded when it
    /// follows one.
    public func readiness() -> Readiness {
        if host.isDraining { return .notReady("draining: the gateway is shutting down") }
        if !host.isListening { return .notReady("not listening") }
        if !logic.isRegistryReady { return .notReady("loading the device registry from the store") }
        if let reason = cluster?.notReadyReason { return .notReady(reason) }
        return .ready
    }

    /// Serves /metrics, /healthz and /readyz for this gateway at `host`:`port` (0 picks a
    /// port) on its loop, until `stop()` or the loop's end.
    public func startMonitoring(host address: String, port: Int) throws(EventLoopError) -> MonitoringEndpoint {
        try MonitoringEndpoint(loop: host.loop, host: address, port: port, metrics: metrics) { [weak self] in
            self?.readiness() ?? .notReady("stopped")
        }
    }

    /// Graceful stop ([5.5-1]): no new connections, GOAWAY SHUTTING_DOWN to every peer,
    /// then `drained` runs on the loop once they are closed. Every caller's `drained` runs.
    public func drain(then drained: @escaping () -> Void) {
        if !host.isDraining {
            follower?.stop()
            configuration.logger.info("sending GOAWAY to every connection")
            host.drain { [configuration] in configuration.logger.info("gateway stopped") }
        }
        // A cluster node's closed connections handed their queues to JetStream: the
        // gateway has stopped once those writes are done.
        host.drain { [cluster] in
            guard let cluster else { return drained() }
            cluster.finish(then: drained)
        }
    }

    /// Stops at once: no new connections and GOAWAY to every peer; connections close once
    /// that is written, or when the loop shuts down. Idempotent.
    public func stop() {
        drain {}
    }
}
