import Logging
import PushClient
import PushClock
import PushEventLoop
import PushSecurity
import PushService
import PushSession
import PushWire

/// The gateway's connection to the store, as role gateway, reading the device registry
/// (SPEC.md 4.16) into `GatewayLogic`: from cursor 0 page by page until has_more = 0 (the
/// registry is then loaded), then one long-polled REGISTRY at a time, so that a revocation
/// reaches the gateway as soon as the store sees it.
///
/// When the link drops (a store restart), `ServerLink` reconnects with backoff; the cursor
/// and everything read are kept, and the gateway serves from them meanwhile ([7.4-4]).
/// The endpoint may list several stores over one database (`--store HOST:PORT,HOST:PORT`):
/// the link then moves to the next store when one fails, refusals included (the gateway
/// keeps trying whatever the failure), and the follower goes on there from the same
/// cursor ([4.16-13]): sequence numbers belong to the database, so every store of the list
/// must serve the same one.
/// Loop-confined: it runs on the gateway's loop, so replies are applied between frames.
public final class RegistryFollower {
    /// How long the store may hold a REGISTRY with nothing new: under its 30 s maximum and
    /// under the keepalive, so a quiet registry costs one small exchange every 25 s.
    public static let defaultWaitMs: UInt32 = 25_000
    /// Entries per page while loading.
    public static let pageLimit = RegistryRequest.maxLimit

    public let endpoint: ServerLink.Endpoint
    /// How long to let the store hold a request; tests shorten it.
    public var waitMs = RegistryFollower.defaultWaitMs
    /// How often expired registrations are forgotten.
    public var expirySweepMs: Int64 = 10_000
    /// After a reply that is an error (BUSY, say), how long to wait before asking again;
    /// doubled for each error in a row, up to `maxRetryDelayMs`.
    public var retryDelayMs: Int64 = 1_000
    public var maxRetryDelayMs: Int64 = 30_000

    private let loop: EventLoop
    private let logic: GatewayLogic
    /// Carries out what the logic decided (GOAWAY REVOKED to revoked devices).
    private let carryOut: () -> Void
    private let logger: Logger
    private let link: ServerLink
    private var requesting = false
    private var stopped = false
    private var sweepTimer: LoopTimer?
    private var retryTimer: LoopTimer?
    /// Whether the link was up the last time it changed, so a drop is logged once.
    private var linkWasUp = false
    /// Failed attempts while the store stays unreachable: a line a minute at most.
    private var failureLog = LogThrottle(intervalMs: 60_000)
    /// REGISTRY requests answered with an error: a line a minute at most.
    private var errorLog = LogThrottle(intervalMs: 60_000)
    /// Errors in a row, for the backoff.
    private var errorsInARow = 0

    /// - Parameters:
    ///   - serverKey: the deployment's server key; the gateway's HELLO credential is derived
    ///     from it (`HelloCredential.gateway`), and the entries are verified with it.
    public init(loop: EventLoop, endpoint: ServerLink.Endpoint, serverKey: SecretKey, wallClock: @escaping () -> UInt64,
                server: GatewayServer, logger: Logger) {
        self.loop = loop
        self.endpoint = endpoint
        self.logic = server.logic
        carryOut = { [weak server] in server?.carryOut() }
        self.logger = logger
        let credentials = HelloCredential.gateway(serverKey)
        link = ServerLink(loop: loop, endpoint: endpoint) {
            // A fresh credential for every connection: the store accepts each one once ([7.1-5]).
            Hello(role: .gateway, credential: credentials.make(for: .store, nowMs: wallClock()), name: "securepush-gateway")
        }
        // The gateway keeps serving and keeps trying: a refusal may be a store that is
        // being set up, or a clock being fixed, and the operator sees it in the log.
        link.stopOnPermanentFailure = false
        link.timeouts.handshakeMs = 10_000
    }

    public func start() {
        guard sweepTimer == nil, !stopped else { return }
        link.onReady = { [weak self] in self?.linkUp() }
        link.onDown = { [weak self] error in self?.linkDown(error) }
        link.start()
        sweepTimer = loop.schedule(after: .milliseconds(expirySweepMs), repeating: true) { [weak self] in
            self?.logic.removeExpiredRegistrations()
            self?.carryOut()
        }
        poll()
    }

    /// Closes the link for good (the gateway is stopping).
    public func stop() {
        stopped = true
        sweepTimer?.cancel()
        retryTimer?.cancel()
        link.stop()
        logic.registryMetrics?.linkUp.set(0)
    }

    // MARK: the link

    private func linkUp() {
        logic.registryMetrics?.linkUp.set(1)
        linkWasUp = true
        let loaded = logic.registry?.isLoaded ?? false
        logger.info(loaded ? "connected to the store again; following its device registry" : "connected to the store; loading its device registry",
                    metadata: ["store": "\(link.currentAddress)", "cursor": "\(logic.registry?.cursor ?? 0)"])
        poll()
    }

    /// The store the link is on now (one of `endpoint`'s addresses).
    public var currentStore: HostPort { link.currentAddress }

    private func linkDown(_ error: ClientError) {
        logic.registryMetrics?.linkUp.set(0)
        let loaded = logic.registry?.isLoaded ?? false
        // The address that failed: the link moves on to the next one after this.
        var metadata: Logger.Metadata = ["store": "\(link.currentAddress)", "error": "\(error)"]
        if linkWasUp {
            linkWasUp = false
            // Once a minute at most from here on, while the store stays away.
            _ = failureLog.event(nowMs: Clocks.monotonicMilliseconds())
            logger.warning(loaded ? "lost the link to the store; serving from the device registry already loaded, reconnecting"
                                  : "lost the link to the store before the device registry was loaded; reconnecting",
                           metadata: metadata)
        } else if let count = failureLog.event(nowMs: Clocks.monotonicMilliseconds()) {
            metadata["attempts"] = "\(count)"
            logger.warning(loaded ? "cannot reach the store; serving from the device registry already loaded"
                                  : "cannot reach the store; device HELLOs get BUSY until the registry is loaded",
                           metadata: metadata)
        }
    }

    // MARK: requests

    /// Asks for the changes after the cursor: at once while loading, long-polled after.
    /// Made while the link is down, the request waits for the next connection.
    private func poll() {
        guard !stopped, !requesting, let registry = logic.registry else { return }
        requesting = true
        let request = RegistryRequest(cursor: registry.cursor, limit: RegistryFollower.pageLimit,
                                      waitMs: registry.isLoaded ? waitMs : 0)
        link.request(.registry(request)) { [weak self] result in self?.answered(result) }
    }

    private func answered(_ result: Result<Message, ClientError>) {
        requesting = false
        guard !stopped else { return }
        switch result {
        case .success(.registryOK(let reply)):
            errorsInARow = 0
            applied(logic.applyRegistry(reply), reply: reply)
            carryOut()
            poll()
        case .success(let other):
            retryLater(after: "the store answered REGISTRY with \(other.type)")
        case .failure(.disconnected):
            // Asked again on the next connection, from the same cursor (`linkUp`).
            if link.isReady { poll() }
        case .failure(let error):
            // A store that does not serve REGISTRY (an older version) answers BAD_REQUEST.
            retryLater(after: "\(error)")
        }
    }

    private func retryLater(after failure: String) {
        errorsInARow += 1
        let delay = min(retryDelayMs << min(errorsInARow - 1, 16), maxRetryDelayMs)
        if let count = errorLog.event(nowMs: Clocks.monotonicMilliseconds()) {
            logger.warning("REGISTRY failed; asking again with backoff",
                           metadata: ["store": "\(link.currentAddress)", "error": "\(failure)", "failures": "\(count)", "retry_ms": "\(delay)"])
        }
        retryTimer?.cancel()
        retryTimer = loop.schedule(after: .milliseconds(delay)) { [weak self] in
            self?.retryTimer = nil
            self?.poll()
        }
    }

    /// Logs what a reply changed: revocations one line each, at info (issue 12.7).
    private func applied(_ update: RegistryUpdate, reply: RegistryOK) {
        for deviceID in update.revokedDevices.sorted() {
            logger.info("registration revoked", metadata: ["device": "\(deviceID)"])
        }
        if update.ignored > 0 {
            logger.warning("ignored registry entries whose credential does not verify under the server key (is the store of another deployment?)",
                           metadata: ["count": "\(update.ignored)"])
        }
        if update.becameLoaded {
            var metadata: Logger.Metadata = ["enrolled": "\(logic.registry?.enrolledCount ?? 0)", "cursor": "\(reply.cursor)"]
            // Each loop of a gateway of several follows the registry for its own devices.
            if let placement = logic.placement { metadata["loop"] = "\(placement.index + 1)/\(placement.count)" }
            logger.info("device registry loaded", metadata: metadata)
        } else if !update.changedDevices.isEmpty {
            logger.debug("registry changes applied", metadata: ["enrolled": "\(update.enrolled)", "cursor": "\(reply.cursor)"])
        }
    }
}
