#if canImport(Glibc)
import Glibc
#endif
import Logging
import PushClient
import PushClock
import PushEventLoop
import PushSecurity
import PushService
import PushSession
import PushWire

/// Everything a push gateway needs to start: where it listens, its keys, its queues and
/// limits.
public struct GatewayConfiguration: Sendable {
    public var host: String
    /// 0 picks a free port; `GatewayService.port` tells which.
    public var port: Int
    /// Serves TLS when set.
    public var tls: TLSContext?
    /// Checks device registrations.
    public var serverKey: SecretKey
    /// Checks provider credentials.
    public var providerKey: SecretKey
    public var settings: GatewaySettings
    /// The store whose device registry the gateway follows (`--store`, `gateway.store`):
    /// then only devices enrolled there connect, and pushes reach enrolled devices that are
    /// offline. Nil: any registration signed with the server key is accepted and targets
    /// match the devices seen since the start (SPEC 1.1; for tests and development).
    public var store: ServerLink.Endpoint?
    /// The cluster to join (`--cluster`, `--node`); nil runs the gateway on its own, with
    /// its queues in memory.
    public var cluster: ClusterConfiguration?
    /// How long the store may hold a REGISTRY with nothing new to report.
    public var registryWaitMs = RegistryFollower.defaultWaitMs
    public var limits: ServiceLimits
    /// Bytes of output a connection may leave unread before it is cut off ([5.5-4]), and of
    /// pushes written to a device and not yet acknowledged ([4.14-5]).
    public var maxOutputBytes: Int {
        get { settings.maxOutputBytes }
        set { settings.maxOutputBytes = newValue }
    }
    public var logger: Logger
    /// Loop threads, each serving the devices whose home it is (`--loops`,
    /// `gateway.loops`); 0 runs one per core. On a cluster node each loop is a member of
    /// the cluster with its own NATS connection.
    public var loops = 1
    /// Set on each loop's copy when it runs in a `GatewayLoops` group.
    var shard: GatewayShard?
    /// Wall-clock milliseconds, for credential lifetimes.
    public var wallClock: @Sendable () -> UInt64
    /// Monotonic milliseconds, for queued pushes' TTLs.
    public var monotonicClock: @Sendable () -> Int64

    public init(serverKey: SecretKey, providerKey: SecretKey, host: String = "127.0.0.1", port: Int = 0) {
        self.host = host
        self.port = port
        self.serverKey = serverKey
        self.providerKey = providerKey
        settings = GatewaySettings()
        limits = ServiceLimits(name: "securepush-gateway", served: GatewayServer.served)
        limits.maxConnections = 20_000
        logger = Logger(label: "securepush.gateway")
        wallClock = Clocks.wallMilliseconds
        monotonicClock = Clocks.monotonicMilliseconds
    }

    /// The gateway of a deployment made by `securepush init`, with its keys and the
    /// settings of its config file (`gateway.queue_capacity`, `gateway.once_memory`, `gateway.handshake_timeout_ms`
    /// and the other `gateway.` keys of `ConfigSchema`, ranges checked when the deployment
    /// was opened). The address is the caller's: a command-line flag wins over `gateway.listen`.
    public init(deployment: Deployment, host: String, port: Int) {
        self.init(serverKey: deployment.serverKey, providerKey: deployment.providerKey, host: host, port: port)
        if let capacity = deployment.integer("queue_capacity", for: .gateway) { settings.queueCapacity = capacity }
        if let window = deployment.integer("delivery_window", for: .gateway) { settings.deliveryWindow = window }
        if let ids = deployment.integer("once_memory", for: .gateway) { settings.onceMemory = ids }
        if let seconds = deployment.integer("max_push_ttl_s", for: .gateway).flatMap(UInt32.init(exactly:)) {
            settings.maxPushTTLSeconds = seconds
        }
        if let bytes = deployment.integer("max_output_bytes", for: .gateway) { maxOutputBytes = bytes }
        if let stall = deployment.integer("output_stall_ms", for: .gateway) { outputStallMs = Int64(stall) }
        if let connections = deployment.integer("max_connections", for: .gateway) { limits.maxConnections = connections }
        if let count = deployment.integer("loops", for: .gateway) { loops = count }
        if let keepalive = deployment.integer("keepalive_ms", for: .gateway), let ms = UInt32(exactly: keepalive) {
            limits.keepaliveMs = ms
        }
        limits.apply(configSection: ConfigService.gateway.rawValue, deployment.integer)
        if let addresses = deployment.config["gateway.store"].flatMap({ try? AddressList(parsing: $0) }) {
            store = ServerLink.Endpoint(addresses)
        }
    }

    public static let maxLoops = 256

    /// The loop threads to run: `loops`, with 0 meaning one per core online.
    public var effectiveLoopCount: Int {
        if loops > 0 { return loops }
        return max(1, min(GatewayConfiguration.maxLoops, sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    }

    /// Pushes queued per offline device ([4.13-5]).
    public var queueCapacity: Int {
        get { settings.queueCapacity }
        set { settings.queueCapacity = newValue }
    }

    /// Pushes written to a device and not yet acknowledged, at most; the rest wait in its
    /// queue and go out as DELIVERY_ACKs come in. Default 64.
    public var deliveryWindow: Int {
        get { settings.deliveryWindow }
        set { settings.deliveryWindow = newValue }
    }

    /// How long pushes and MISSED may wait in a device's output with the device taking no
    /// byte of it before it is closed as a slow consumer ([5.5-7]); 0 turns the rule off.
    /// Default 10,000 ms.
    public var outputStallMs: Int64 {
        get { settings.outputStallMs }
        set { settings.outputStallMs = newValue }
    }

    /// Ids of PUSHes with `once` 1 each loop remembers, at most, to answer a repeat with
    /// the first one's counts ([4.13-12]); past it the oldest is forgotten first. Default 100,000.
    public var onceMemory: Int {
        get { settings.onceMemory }
        set { settings.onceMemory = newValue }
    }

    func validate() throws(GatewayServiceError) {
        guard settings.queueCapacity >= 1 else { throw .invalidConfiguration("the queue capacity must be at least 1") }
        guard settings.deliveryWindow >= 1 else { throw .invalidConfiguration("the delivery window must be at least 1") }
        guard settings.onceMemory >= 1 else { throw .invalidConfiguration("the once memory must be at least 1 id") }
        guard settings.maxPushTTLSeconds >= 1 else { throw .invalidConfiguration("the longest push TTL must be at least 1 s") }
        guard settings.outputStallMs >= 0 else { throw .invalidConfiguration("the output stall limit must be 0 (off) or more ms") }
        guard maxOutputBytes >= 1024 else { throw .invalidConfiguration("the output limit must be at least 1024 bytes") }
        if let problem = limits.problem { throw .invalidConfiguration(problem) }
        if let problem = cluster?.problem { throw .invalidConfiguration(problem) }
        guard (0...GatewayConfiguration.maxLoops).contains(loops) else {
            throw .invalidConfiguration("the number of loops must be 0 (one per core) to \(GatewayConfiguration.maxLoops)")
        }
        guard (1...RegistryRequest.maxWaitMs).contains(registryWaitMs) else {
            throw .invalidConfiguration("the registry wait must be 1 to \(RegistryRequest.maxWaitMs) ms")
        }
    }
}
