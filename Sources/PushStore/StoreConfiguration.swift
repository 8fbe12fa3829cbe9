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
import PushStoreLogic
import PushStoreSQLite
import PushWire

/// Everything a payload store needs to start: where its database is, where it listens,
/// its keys, limits and lifetimes.
public struct StoreConfiguration: Sendable {
    /// The SQLite file; created with its schema if missing. With `database` set it is not
    /// opened, but the data keys that seal payloads are still read from beside it.
    public var databasePath: String
    /// A PostgreSQL database shared by any number of stores (`postgresql://` or
    /// `postgres://` URL, or libpq's `key=value` form); nil keeps SQLite at `databasePath`.
    public var database: String?
    public var host: String
    /// 0 picks a free port; `StoreService.port` tells which.
    public var port: Int
    /// Serves TLS when set.
    public var tls: TLSContext?
    /// Signs and checks fetch tokens.
    public var serverKey: SecretKey
    /// Checks provider credentials.
    public var providerKey: SecretKey
    public var settings: StoreSettings
    /// Connection limits and deadlines (a deployment's config file may set the handshake
    /// and frame deadlines and the pending-handshake caps); `maxFrame` is raised at start to
    /// fit the largest payload.
    public var limits: ServiceLimits
    public var logger: Logger
    /// Wall-clock milliseconds, for token and payload lifetimes, login windows and the sweep.
    public var clock: @Sendable () -> UInt64
    /// Loop threads serving requests (`--loops`, `store.loops`); 0 runs one per core. On
    /// SQLite they share one writer thread; on PostgreSQL each has its own connections.
    public var loops = 1
    /// The gateways the store hands the pushes of SENDs to (`--gateway`, `store.gateway`),
    /// connecting as a provider; without them the store refuses SEND ([4.17-3]).
    public var gateway: ServerLink.Endpoint? {
        didSet { settings.forwardsPushes = gateway != nil }
    }
    /// The HTTP provider API (`--http`, `store.http`); nil serves none. It serves TLS with
    /// `tls` when that is set, as the protocol listener does.
    public var http: StoreHTTPConfiguration?
    /// Set on each loop's copy when it runs in a `StoreLoops` group.
    var shard: StoreShard?

    public init(databasePath: String, serverKey: SecretKey, providerKey: SecretKey, host: String = "127.0.0.1", port: Int = 0) {
        self.databasePath = databasePath
        self.host = host
        self.port = port
        self.serverKey = serverKey
        self.providerKey = providerKey
        settings = StoreSettings()
        limits = ServiceLimits(name: "securepush-store", served: StoreServer.served)
        logger = Logger(label: "securepush.store")
        clock = Clocks.wallMilliseconds
    }

    /// The store of a deployment made by `securepush init`: its database file, its keys,
    /// and the store settings of its config file (`store.max_payload_bytes` and the other
    /// `store.` keys of `ConfigSchema`, ranges checked when the deployment was opened).
    /// The address is the caller's: a command-line flag wins over `store.listen`.
    public init(deployment: Deployment, host: String, port: Int) {
        self.init(databasePath: StoreFiles.databasePath(deployment.directory), serverKey: deployment.serverKey,
                  providerKey: deployment.providerKey, host: host, port: port)
        database = deployment.value("database", for: .store)
        if let maxPayload = deployment.integer("max_payload_bytes", for: .store) { settings.maxPayloadBytes = maxPayload }
        if let lifetime = deployment.integer("token_lifetime_s", for: .store), lifetime > 0 {
            settings.tokenLifetimeMs = UInt64(lifetime) * 1000
        }
        if let badTokens = deployment.integer("bad_tokens_per_address", for: .store) { settings.badTokensPerAddress = badTokens }
        if let connections = deployment.integer("max_connections", for: .store) { limits.maxConnections = connections }
        if let keepalive = deployment.integer("keepalive_ms", for: .store), let ms = UInt32(exactly: keepalive) {
            limits.keepaliveMs = ms
        }
        limits.apply(configSection: ConfigService.store.rawValue, deployment.integer)
        if let count = deployment.integer("loops", for: .store) { loops = count }
        if let lease = deployment.integer("outbox_lease_s", for: .store), lease > 0 { settings.outboxLeaseMs = UInt64(lease) * 1000 }
        if let iterations = deployment.integer("password.iterations") { settings.passwordIterations = iterations }
    }

    public static let maxLoops = SQLiteStoreWriterGroup.maxLoops

    /// The loop threads to run: `loops`, with 0 meaning one per core online.
    public var effectiveLoopCount: Int {
        if loops > 0 { return loops }
        return max(1, min(StoreConfiguration.maxLoops, sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    }

    /// Room a STORE frame needs beside its payload: the user, TTL and other fields.
    static let frameOverhead = 1024

    /// The limits the store runs with: a frame must hold the largest payload and its fields.
    func effectiveLimits() throws(StoreServiceError) -> ServiceLimits {
        let largest = FrameLimits.ceiling - StoreConfiguration.frameOverhead
        guard settings.maxPayloadBytes > 0, settings.maxPayloadBytes <= largest else {
            throw .invalidConfiguration("the largest payload must be between 1 and \(largest) bytes, not \(settings.maxPayloadBytes)")
        }
        guard settings.tokenLifetimeMs > 0 else { throw .invalidConfiguration("the fetch token lifetime must be above 0") }
        guard settings.badTokensPerAddress > 0, settings.badTokenWindowMs > 0 else {
            throw .invalidConfiguration("the BAD_TOKEN limit per address and its window must be above 0")
        }
        if let problem = limits.problem { throw .invalidConfiguration(problem) }
        guard (0...StoreConfiguration.maxLoops).contains(loops) else {
            throw .invalidConfiguration("the number of loops must be 0 (one per core) to \(StoreConfiguration.maxLoops)")
        }
        var limits = self.limits
        limits.maxFrame = min(FrameLimits.ceiling, max(limits.maxFrame, settings.maxPayloadBytes + StoreConfiguration.frameOverhead))
        return limits
    }
}
