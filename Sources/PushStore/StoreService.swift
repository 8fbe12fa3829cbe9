import Logging
import PushClient
import PushClock
import PushEventLoop
import PushService
import PushSession
import PushStoreLogic
import PushStorePostgres
import PushStoreSQLite

/// Why a store did not start.
public enum StoreServiceError: Error, CustomStringConvertible {
    case invalidConfiguration(String)
    case cannotStartSQLite(SQLiteStoreBackend.StartFailure)
    /// A bad URL, an unreachable server, a schema newer than this build: never the password.
    case cannotStartPostgres(PostgresStoreBackend.StartFailure)
    case cannotListen(host: String, port: Int, EventLoopError)

    public var description: String {
        switch self {
        case .invalidConfiguration(let text): "invalid store configuration: \(text)"
        case .cannotStartSQLite(let failure): failure.description
        case .cannotStartPostgres(let failure): failure.description
        case .cannotListen(let host, let port, let error): "cannot listen on \(host):\(port): \(error)"
        }
    }
}

/// A running payload store: its backend (SQLite by default, PostgreSQL when the
/// configuration names a database URL), its request logic and its listener. Loop-confined;
/// start, drain and stop it on its loop.
///
/// Keep the service until its loop has shut down: the loop's timers and listener call
/// into it for as long as the loop runs.
public final class StoreService: LoopGroupMember {
    public let configuration: StoreConfiguration
    /// The port it listens on (the one picked when the configuration said 0).
    public let port: Int
    private let host: ServiceHost<StoreServer>
    /// Every address it listens on, as HOST:PORT.
    public var listeningAddresses: [String] { host.listeningAddresses }
    private let server: StoreServer
    private let backend: StoreBackend
    private var pruneTimer: LoopTimer?
    private var writerStopped = false
    /// The HTTP provider API on this loop, with `configuration.http`.
    private var httpAPI: StoreHTTPAPI?
    /// The HTTP API's port (the real one when 0 was asked for); nil without one.
    public var httpPort: Int? { httpAPI?.port }
    /// The data directory must take writes on SQLite; on PostgreSQL the database is elsewhere.
    private var diskProbe: WritableDirectoryProbe?
    /// A failed group commit keeps the store unready this long (unless it drains first):
    /// long enough for a probe to see it, short enough that a passing fault does not keep
    /// traffic away once commits succeed again.
    static let commitFailureUnreadyMs: Int64 = 30_000

    private init(configuration: StoreConfiguration, port: Int, host: ServiceHost<StoreServer>, server: StoreServer,
                 backend: StoreBackend) {
        self.configuration = configuration
        self.port = port
        self.host = host
        self.server = server
        self.backend = backend
        // Every loop of a store on SQLite writes to the same directory: the first probes it.
        if configuration.database == nil, configuration.speaksForProcess {
            diskProbe = WritableDirectoryProbe(directory: StoreService.directory(of: configuration.databasePath))
        }
    }

    /// The directory holding the database file (and its WAL), which must take writes.
    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    deinit { backend.stop() }

    /// Opens the database (SQLite: reads the stored IDs and starts the writer thread;
    /// PostgreSQL: checks the schema and opens the loop's connections) and listens.
    /// Everything started is stopped again if a later step fails.
    public static func start(_ configuration: StoreConfiguration, on loop: EventLoop) throws(StoreServiceError) -> StoreService {
        let limits = try configuration.effectiveLimits()
        let backend = try openDatabase(configuration, on: loop)
        let shard = configuration.shard
        let logic = StoreLogic(settings: configuration.settings, serverKey: configuration.serverKey,
                               providerKey: configuration.providerKey, clock: configuration.clock, shared: shard?.shared)
        logic.sharesTokenLimits = backend.sharesLoginLimits
        let server = StoreServer(loop: loop, limits: limits, logger: configuration.logger, logic: logic, backend: backend,
                                 admission: shard?.seat.admission, speaksForProcess: configuration.speaksForProcess)
        let host = server.host!
        host.registerMetrics(in: server.metrics.registry, prefix: "securepush_store", includingSharedCounts: configuration.speaksForProcess,
                             loop: shard?.seat.index)
        var httpAPI: StoreHTTPAPI?
        if let http = configuration.http {
            do {
                httpAPI = try StoreHTTPAPI(server: server, configuration: http, tls: configuration.tls,
                                           shared: shard?.http ?? StoreHTTPShared(http),
                                           speaksForProcess: configuration.speaksForProcess, logger: configuration.logger, loop: loop)
            } catch {
                server.stopTimers()
                backend.stop()
                throw .cannotListen(host: http.host, port: http.port, error)
            }
        }
        do {
            let dispatch = shard?.seat.spreadingAccepts()
            if let listening = shard?.seat.listening {
                try host.listen(sharing: listening, dispatch: dispatch)
            } else {
                try host.listen(host: configuration.host, port: configuration.port, tls: configuration.tls, dispatch: dispatch)
            }
        } catch {
            httpAPI?.stop()
            server.stopTimers()
            backend.stop()
            throw .cannotListen(host: configuration.host, port: configuration.port, error)
        }
        if let gateway = configuration.gateway {
            server.forwarder = startForwarder(to: gateway, configuration, server: server, backend: backend, on: loop)
        }
        let service = StoreService(configuration: configuration, port: host.port ?? configuration.port, host: host,
                                   server: server, backend: backend)
        service.httpAPI = httpAPI
        // The other loops of a store of several start quietly, and leave the shared limits
        // to the first to prune.
        guard configuration.speaksForProcess else { return service }
        let pruneEvery = Duration.milliseconds(max(1_000, configuration.settings.loginFailureWindowMs))
        service.pruneTimer = loop.schedule(after: pruneEvery, repeating: true) { logic.pruneLimiters() }
        // `location` never holds a password (PostgresURL.redacted).
        configuration.logger.info("store ready", metadata: [
            "listen": "\(configuration.host):\(service.port)", "database": "\(backend.location)",
            "http": "\(httpAPI.map { "\(configuration.http?.host ?? ""):\($0.port)" } ?? "off")",
            "backend": "\(backend.kind)",
        ])
        return service
    }

    /// SQLite: reads the stored IDs and starts the writer thread (or joins the shard's group);
    /// PostgreSQL: checks the schema and opens the loop's connections.
    private static func openDatabase(_ configuration: StoreConfiguration, on loop: EventLoop) throws(StoreServiceError) -> StoreBackend {
        let path = configuration.databasePath
        if let url = configuration.database {
            do {
                return try PostgresStoreBackend.start(url: url, settings: configuration.settings,
                                                      dataKeysPath: StoreFiles.dataKeysPath(forDatabase: path), clock: configuration.clock,
                                                      logger: configuration.logger, loopIndex: configuration.loopIndex,
                                                      outboxOwner: configuration.outboxOwner, on: loop)
            } catch {
                throw .cannotStartPostgres(error)
            }
        }
        do {
            if let group = configuration.shard?.sqlite {
                return try group.attach(index: configuration.loopIndex, on: loop)
            }
            return try SQLiteStoreBackend.start(path: path, settings: configuration.settings, clock: configuration.clock, on: loop)
        } catch {
            throw .cannotStartSQLite(error)
        }
    }

    /// The loop's link to the gateways for SENDs' pushes ([4.17-3]). On SQLite the loop that
    /// speaks for the process reads what a previous run left waiting; on PostgreSQL, where
    /// each loop is a store of its own, every loop does.
    private static func startForwarder(to gateway: ServerLink.Endpoint, _ configuration: StoreConfiguration, server: StoreServer,
                                       backend: StoreBackend, on loop: EventLoop) -> OutboxForwarder {
        let metrics = OutboxMetrics(registry: server.metrics.registry, loop: configuration.shard?.seat.index)
        let forwarder = OutboxForwarder(
            loop: loop, gateway: gateway, providerKey: configuration.providerKey, wallClock: configuration.clock,
            logger: configuration.logger, metrics: metrics,
            scanAtStart: configuration.database != nil || configuration.speaksForProcess,
            speaksForProcess: configuration.speaksForProcess,
            // On PostgreSQL other stores' pushes whose lease is over are claimed too.
            rescanEveryMs: configuration.database == nil ? nil : OutboxForwarder.claimEveryMs,
            waitingPushes: { [weak backend] cursor, limit, completion in
                guard let backend else { return completion(.success([])) }
                backend.waitingPushes(after: cursor, limit: limit, completion: completion)
            },
            record: { [weak backend] handed in backend?.submit(.pushesHanded(handed), ticket: 0) })
        forwarder.wasRecalled = { [logic = server.logic] id in logic.wasRecalled(id) }
        forwarder.start()
        return forwarder
    }

    /// Graceful stop ([5.5-1]): no new connections, GOAWAY SHUTTING_DOWN to every peer,
    /// replies to what was accepted (commits included), the same for the HTTP API (new
    /// requests 503, each answer closing its connection, every answer written), then the
    /// writer thread ends and `drained` runs on the loop. Every caller's `drained` runs, however many ask.
    public func drain(then drained: @escaping () -> Void) {
        if !host.isDraining, configuration.speaksForProcess { configuration.logger.info("draining") }
        server.releaseHeldRegistries()
        // HTTP requests taken are answered like the protocol's, and their answers written,
        // before the HTTP server is freed (stopWriter).
        httpAPI?.drain {}
        host.drain { [self] in
            let finish = { [self] in
                // A backend that commits on the loop (PostgreSQL) waits for its last group first.
                guard !writerStopped else { return drained() }
                server.forwarder?.stop()
                server.flushFetchTallies()
                backend.finish { [self] in
                    stopWriter()
                    drained()
                }
            }
            guard let httpAPI else { return finish() }
            httpAPI.drain(then: finish)
        }
    }

    /// Stops at once: no new connections, GOAWAY to every peer, and the writer thread
    /// commits what it holds and ends before this returns. Connections close once their
    /// last replies are written, or when the loop shuts down. Idempotent.
    public func stop() {
        drain {}
        stopWriter()
    }

    /// Open client connections.
    public var connectionCount: Int { host.connectionCount }
    public var isDraining: Bool { host.isDraining }

    /// The store's metrics; add process and build metrics to it before serving it.
    public var metrics: MetricsRegistry { server.metrics.registry }

    /// Ready while listening, not draining, and able to make writes durable: no group
    /// commit failed in the last 30 seconds, and the data directory takes writes (its file
    /// system is writable and has room; checked at most once a second), or, on PostgreSQL,
    /// every connection to the database is up (and a failed commit is over once a later
    /// group commits or the write connection is back).
    public func readiness() -> Readiness {
        if host.isDraining { return .notReady("draining: the store is shutting down") }
        if !host.isListening { return .notReady("not listening") }
        let now = Clocks.monotonicMilliseconds()
        if let failed = server.lastCommitFailureMs, now - failed < StoreService.commitFailureUnreadyMs,
           (backend.writesWorkSinceMs ?? 0) <= failed {
            return .notReady("a group commit failed \((now - failed) / 1000) s ago")
        }
        if let problem = backend.problem { return .notReady(problem) }
        if let problem = diskProbe?.problem(nowMs: now) { return .notReady(problem) }
        return .ready
    }

    /// Serves /metrics, /healthz and /readyz for this store at `host`:`port` (0 picks a
    /// port) on its loop, until `stop()` or the loop's end.
    public func startMonitoring(host address: String, port: Int) throws(EventLoopError) -> MonitoringEndpoint {
        try MonitoringEndpoint(loop: host.loop, host: address, port: port, metrics: metrics) { [weak self] in
            self?.readiness() ?? .notReady("stopped")
        }
    }

    /// The loop it runs on.
    public var loop: EventLoop { host.loop }

    /// What another loop needs to accept on this store's listening sockets too.
    public func shareListener() throws(EventLoopError) -> SharedListenSockets { try host.shareListener() }

    /// Serves a connection another loop of this store accepted and placed here.
    public func takeOver(acceptedSocket fd: Int32) { host.takeOver(acceptedSocket: fd) }

    private func stopWriter() {
        guard !writerStopped else { return }
        writerStopped = true
        pruneTimer?.cancel()
        server.forwarder?.stop()
        server.flushFetchTallies()
        server.stopTimers()
        backend.stop()
        httpAPI?.stop()
        if let problem = backend.lastStopProblem { configuration.logger.warning("\(problem)") }
        if configuration.speaksForProcess { configuration.logger.info("store stopped") }
    }
}
