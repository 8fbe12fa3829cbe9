import Dispatch
import Logging
import PushClock
import PushEventLoop
import PushSecurity
import PushService
import PushSession
import PushStoreLogic
import PushWire

/// The store as a network service: `ServiceHost` runs the connection lifecycle, this
/// carries out what `StoreLogic` decides. Loop-confined.
public final class StoreServer: ServiceHandler {
    public typealias Peer = ServicePeer<StoreServer>
    /// Set once in `init`; the server owns its host.
    public private(set) var host: ServiceHost<StoreServer>!
    let logic: StoreLogic
    public let metrics: StoreMetrics
    private let backend: StoreBackend
    private var awaitingCommit: [UInt64: PendingCommit] = [:]
    private var nextTicket: UInt64 = 1
    /// Requests whose reads a backend has not answered yet (never for SQLite).
    private var reading = 0
    /// The registry's last change this store has noticed and reported.
    private var noticedRegistrySequence: UInt64
    private var registryPollInFlight = false
    private var tokenLimitPollInFlight = false
    private var logins = 0
    private var tallyTimer: LoopTimer?
    private var rateLimitLog = LogThrottle()
    private var revokedTokenLog = LogThrottle()
    private var registryFailureLog = LogThrottle(intervalMs: 10_000)
    /// REGISTRY requests waiting for a change after their cursor ([4.16-8]), oldest first.
    private var heldRegistries: [HeldRegistry] = []
    /// When the last group commit failed (monotonic ms), if one has; readiness looks at it.
    public private(set) var lastCommitFailureMs: Int64?
    /// A store on one loop, or the first of several, which counts and logs for them all.
    private let speaksForProcess: Bool
    /// Hands SENDs' pushes to a gateway (`--gateway`); nil when the store refuses SEND.
    public var forwarder: OutboxForwarder?

    /// A request whose reply waits for its write to be durable.
    private struct PendingCommit {
        var requester: StoreRequester
        var reply: CommittedReply
        var type: MessageType
        var startNs: UInt64
    }
    /// A REGISTRY held until the registry changes or `deadlineMs` (monotonic) passes.
    private struct HeldRegistry {
        var peer: Peer
        var correlation: UInt32
        var request: RegistryRequest
        var deadlineMs: Int64
        var startNs: UInt64
    }
    static let maxTalliesPerBatch = 4096
    /// How often the registry's change counter is looked at, so that a held REGISTRY is
    /// answered well within a second of a change made by another process ([4.16-8]).
    static let registryPollMs = 200
    /// Requests the store serves ([4.1-4]).
    public static let served: Set<MessageType> = [.login, .store, .send, .fetch, .sync, .ack, .recall, .status, .registry, .keys]

    public var hasPendingWork: Bool { !awaitingCommit.isEmpty || logins > 0 || reading > 0 }

    /// Takes over the backend's commit deliveries.
    /// `admission`: the connection caps shared with the store's other loops, if any.
    public init(loop: EventLoop, limits: ServiceLimits, logger: Logger, logic: StoreLogic, backend: StoreBackend,
                metrics: StoreMetrics = StoreMetrics(), admission: AdmissionGate? = nil, speaksForProcess: Bool = true) {
        self.logic = logic
        self.speaksForProcess = speaksForProcess
        self.backend = backend
        self.metrics = metrics
        noticedRegistrySequence = backend.registrySequenceAtStart
        host = ServiceHost(loop: loop, limits: limits, logger: logger, handler: self, admission: admission)
        backend.onCommitted = { [weak self] tickets, outcomes in self?.deliverCommitted(tickets: tickets, outcomes: outcomes) }
        tallyTimer = loop.schedule(after: .milliseconds(StoreServer.registryPollMs), repeating: true) { [weak self] in
            self?.flushFetchTallies()
            self?.logDueRateLimits()
            self?.pollRegistry()
            self?.shareTokenLimits()
        }
        logic.onTokenRevoked = { [unowned self] reason, claims, session in
            tokenRevoked(reason, claims: claims, session: session)
        }
    }

    /// Cancels the tally timer, which holds the server only weakly; after a drain or a failed start.
    public func stopTimers() {
        tallyTimer?.cancel()
        tallyTimer = nil
    }

    /// With limits kept in the database: this process's refused tokens counted there, and
    /// the addresses any store has limited read back, five times a second, by the loop that
    /// speaks for the process ([8-9]). A guesser spread over the stores meets the limit
    /// within that much of its last refusal.
    private func shareTokenLimits() {
        guard logic.sharesTokenLimits, speaksForProcess, !tokenLimitPollInFlight else { return }
        let failures = logic.takeTokenFailures()
        if !failures.isEmpty { backend.submit(.tokenFailures(failures), ticket: 0) }
        tokenLimitPollInFlight = true
        let settings = logic.settings
        backend.limitedTokenAddresses(limit: settings.badTokensPerAddress, windowMs: settings.badTokenWindowMs,
                                      nowMs: Clocks.wallMilliseconds()) { [weak self] result in
            guard let self else { return }
            tokenLimitPollInFlight = false
            // A database that is down is the readiness check's and the registry poll's to report.
            if case .success(let limited) = result { logic.markLimited(limited) }
        }
    }

    /// One writer operation for many FETCHes instead of one UPDATE each.
    public func flushFetchTallies() {
        let tallies = logic.takeFetchTallies()
        if !tallies.isEmpty { backend.submit(.recordFetches(tallies), ticket: 0) }
    }

    public func admit(_ hello: Hello, peer: Peer) -> Admission<StoreSession> {
        if case .refuse(let status, let reply, let reason) = logic.admit(hello) { return .refuse(status, reply, logDetail: reason) }
        return .admit(StoreSession(peerAddress: peer.peerHost, role: hello.role))
    }

    public func admitted(_ peer: Peer) {
        if let frame = peer.session.negotiated?.maxFrame { peer.state?.maxFrame = Int(frame) }
    }

    public func closed(_ peer: Peer, reason: CloseReason) {
        host.logger.debug("connection closed", metadata: ["peer": "\(peer.peerHost)", "reason": "\(reason)"])
        if heldRegistries.contains(where: { $0.peer === peer }) {
            heldRegistries.removeAll { $0.peer === peer }
            metrics.registryHeld.set(heldRegistries.count)
        }
    }

    public func serve(_ message: Message, correlation: UInt32, peer: Peer) {
        guard let session = peer.state else { return }
        let startNs = Clocks.monotonicNanoseconds()
        perform(logic.handle(message, session: session), for: message, requester: .wire(peer, correlation: correlation), startNs: startNs)
    }

    /// Reads what an HTTP request needs before it can be served (its API token); counted
    /// as pending work, so a drain waits for it.
    func read(_ reads: StoreReads, then finish: @escaping (Result<StoreReadResult, StoreBackendError>) -> Void) {
        if let result = backend.readNow(reads) { return finish(result) }
        reading += 1
        backend.read(reads) { [weak self] result in
            guard let self else { return }
            reading -= 1
            finish(result)
            host.finishDrainIfDone()
        }
    }

    /// A request that arrived over HTTP, already authenticated (`StoreHTTPAPI`).
    func serve(_ message: Message, call: StoreHTTPCall) {
        perform(logic.handle(message, session: call.session), for: message, requester: .http(call), startNs: call.startNs)
    }

    /// A request over HTTP whose API token was kept from an earlier one (`StoreHTTPAPI`): the
    /// tokens' change cursor is read with the request's own reads, as of the same moment
    /// (one statement on PostgreSQL), or alone when the request reads nothing; `proceed`
    /// says from what was read whether the request goes on (when not, it has answered the
    /// request or started it over itself).
    func serve(_ message: Message, call: StoreHTTPCall, proceed: @escaping (Result<StoreReadResult, StoreBackendError>) -> Bool) {
        let requester = StoreRequester.http(call)
        switch logic.handle(message, session: call.session) {
        case .read(var reads, let pending):
            reads.apiTokensRevision = true
            read(reads) { [weak self] result in
                guard let self, proceed(result) else { return }
                resume(pending, with: result, for: message, requester: requester, startNs: call.startNs)
            }
        case let action:
            read(StoreReads(apiTokensRevision: true)) { [weak self] result in
                guard let self, proceed(result) else { return }
                perform(action, for: message, requester: requester, startNs: call.startNs)
            }
        }
    }

    private func respond(_ message: Message, to requester: StoreRequester, createdAt: UInt64? = nil) {
        switch requester {
        case .wire(let peer, let correlation): host.respond(message, correlation: correlation, to: peer)
        case .http(let call): call.answer(message, createdAt: createdAt)
        }
    }

    private func perform(_ action: consuming StoreAction, for request: Message, requester: StoreRequester, startNs: UInt64) {
        // Consumed: binding the payloads of a borrowed action copied them (the reads and
        // the pending request are a few hundred bytes).
        switch consume action {
        case .reply(let message):
            respond(message, to: requester)
            answered(request, with: message, requester: requester, startNs: startNs)
            if logic.pendingFetchTallies >= StoreServer.maxTalliesPerBatch { flushFetchTallies() }
        case .replay(let sent, let createdAt):
            respond(.sendOK(sent), to: requester, createdAt: createdAt)
            answered(request, with: .sendOK(sent), requester: requester, startNs: startNs)

        case .commit(let operation, let reply):
            let ticket = nextTicket
            nextTicket += 1
            awaitingCommit[ticket] = PendingCommit(requester: requester, reply: reply, type: request.type, startNs: startNs)
            backend.submit(operation, ticket: ticket)
        case .read(let reads, let pending):
            // A backend that answers at once spares the request the closure below.
            if let result = backend.readNow(reads) {
                return resume(pending, with: result, for: request, requester: requester, startNs: startNs)
            }
            reading += 1
            backend.read(reads) { [weak self] result in
                guard let self else { return }
                reading -= 1
                resume(pending, with: result, for: request, requester: requester, startNs: startNs)
                host.finishDrainIfDone()
            }
        case .loginDecided(let result):
            if let attempt = result.sharedAttempt { backend.submit(.loginAttempt(attempt), ticket: 0) }
            if let change = result.keyChange, case .loginOK(let reply) = result.reply {
                // LOGIN_OK waits for the key to be durable ([4.6-5]).
                return perform(.commit(.deviceKey(change), .loginOK(reply)), for: request, requester: requester, startNs: startNs)
            }
            respond(result.reply, to: requester)
            answered(request, with: result.reply, requester: requester, startNs: startNs, loginRefusal: result.refusal)
        case .verifyPassword(let login, let storedHash):
            // LOGIN and REGISTRY come over the protocol only: the HTTP API serves neither.
            guard case .wire(let peer, let correlation) = requester else { return }
            logins += 1
            verifyPassword(login, storedHash: storedHash, peer: peer, correlation: correlation, startNs: startNs)
        case .hold(let registry):
            // A drain answers what is held at once, and what arrives during one too.
            guard case .wire(let peer, let correlation) = requester, !host.isDraining else {
                perform(.reply(StoreLogic.emptyRegistryReply(registry)), for: request, requester: requester, startNs: startNs)
                return
            }
            let waitMs = Int64(min(registry.waitMs, RegistryRequest.maxWaitMs))
            heldRegistries.append(HeldRegistry(peer: peer, correlation: correlation, request: registry,
                                               deadlineMs: Clocks.monotonicMilliseconds() + waitMs, startNs: startNs))
            metrics.registryHeld.set(heldRegistries.count)
        }
    }

    /// Carries on with a request whose reads are done, if its connection still is.
    private func resume(_ pending: consuming PendingRequest, with result: consuming Result<StoreReadResult, StoreBackendError>, for request: Message,
                        requester: StoreRequester, startNs: UInt64) {
        guard requester.isOpen, let session = requester.session else { return }
        perform(logic.resume(pending, with: result, session: session), for: request, requester: requester, startNs: startNs)
    }

    // MARK: the registry

    /// Looks for registry changes (one `PRAGMA data_version` on SQLite when there are
    /// none), logs them, answers the held REGISTRYs they concern, and those whose wait is over.
    func pollRegistry() {
        guard !registryPollInFlight else { return }
        registryPollInFlight = true
        backend.registryNotice(after: noticedRegistrySequence) { [weak self] result in
            guard let self else { return }
            registryPollInFlight = false
            var notice: RegistryNotice?
            switch result {
            case .success(let found): notice = found
            case .failure(let error):
                // Polled five times a second: a database that is down would flood the log.
                if let count = registryFailureLog.event(nowMs: Clocks.monotonicMilliseconds()) {
                    var metadata: Logger.Metadata = ["error": "\(error)"]
                    if count > 1 { metadata["count"] = "\(count)" }
                    host.logger.warning("cannot read the registry", metadata: metadata)
                }
            }
            // Every loop polls for its own held REGISTRYs; the first alone counts and logs.
            if let notice { noticedRegistrySequence = notice.to }
            if let notice, speaksForProcess {
                metrics.registryEnrolments.increment(by: notice.counts.enrolled)
                metrics.registryRevocations.increment(by: notice.counts.revoked)
                host.logger.info("registry changed", metadata: [
                    "changes": "\(notice.to &- notice.from)", "enrolled": "\(notice.counts.enrolled)",
                    "revoked": "\(notice.counts.revoked)", "cursor": "\(notice.to)",
                ])
            }
            answerHeldRegistries(changed: notice != nil)
        }
    }

    private func answerHeldRegistries(changed: Bool) {
        guard !heldRegistries.isEmpty else { return }
        let now = Clocks.monotonicMilliseconds()
        let all = heldRegistries
        heldRegistries = []
        for held in all {
            guard let session = held.peer.state else { continue }
            if now >= held.deadlineMs {
                answerHeld(held, with: StoreLogic.emptyRegistryReply(held.request))
            } else if changed {
                // Asked again; held anew if its page is still empty.
                backend.read(logic.registryReads(held.request, session: session)) { [weak self] result in
                    guard let self else { return }
                    if let reply = logic.heldRegistryReply(result) {
                        answerHeld(held, with: reply)
                    } else if !host.isDraining, held.peer.connection.isOpen {
                        heldRegistries.append(held)
                        metrics.registryHeld.set(heldRegistries.count)
                    } else {
                        answerHeld(held, with: StoreLogic.emptyRegistryReply(held.request))
                    }
                }
            } else {
                heldRegistries.append(held)
            }
        }
        metrics.registryHeld.set(heldRegistries.count)
    }

    /// Answers every held REGISTRY with no entries: the store is draining ([4.16-9]).
    public func releaseHeldRegistries() {
        let held = heldRegistries
        heldRegistries = []
        metrics.registryHeld.set(0)
        for request in held { answerHeld(request, with: StoreLogic.emptyRegistryReply(request.request)) }
    }

    private func answerHeld(_ held: HeldRegistry, with reply: Message) {
        host.respond(reply, correlation: held.correlation, to: held.peer)
        metrics.answered(.registry, with: reply, startNs: held.startNs)
    }

    /// Logs a refused revoked token at info, one line a second at most (a device can
    /// retry as fast as it likes), and counts it.
    private func tokenRevoked(_ reason: TokenRevocation, claims: FetchToken, session: StoreSession) {
        metrics.tokensRevoked[reason]?.increment()
        guard let count = revokedTokenLog.event(nowMs: Clocks.monotonicMilliseconds()) else { return }
        var metadata: Logger.Metadata = ["reason": "\(reason.rawValue)", "user": "\(claims.user)", "device": "\(claims.deviceID)",
                                         "peer": "\(session.peerAddress)"]
        if count > 1 { metadata["count"] = "\(count)" }
        host.logger.info("token revoked", metadata: metadata)
    }

    /// Counts a reply and logs what an operator watches for: failed logins (the user, the
    /// device, the address and why, never the password) and rate-limited requests.
    private func answered(_ request: Message, with reply: Message, requester: StoreRequester, startNs: UInt64,
                          loginRefusal: LoginRefusal? = nil) {
        metrics.answered(request.type, with: reply, startNs: startNs)
        guard case .error(let error) = reply else { return }
        let login: Login? = if case .login(let login) = request { login } else { nil }
        switch error.status {
        case .badCredentials where login != nil:
            metrics.loginsFailed.increment()
            if loginRefusal == .deviceNotEnrolled { metrics.loginsDeviceNotEnrolled.increment() }
            host.logger.info("login failed", metadata: ["user": "\(login?.user ?? "")", "peer": "\(requester.peerHost)",
                                                        "device": "\(login?.deviceID ?? "")",
                                                        "reason": "\((loginRefusal ?? .wrongPassword).rawValue)"])
        case .rateLimited:
            logRateLimited(request: request.type.specName, peer: requester.peerHost, reason: error.message ?? "", user: login?.user)
        default:
            break
        }
    }

    /// A request refused for a rate limit, over the protocol or HTTP: logged at info, one
    /// line a second at most for the whole store loop (the rest summed into the next line).
    func logRateLimited(request: String, peer: String, reason: String, user: String? = nil) {
        guard let count = rateLimitLog.event(nowMs: Clocks.monotonicMilliseconds()) else { return }
        var metadata: Logger.Metadata = ["request": "\(request)", "peer": "\(peer)", "reason": "\(reason)"]
        if let user { metadata["user"] = "\(user)" }
        if count > 1 { metadata["count"] = "\(count)" }
        host.logger.info("rate limited", metadata: metadata)
    }

    /// Rate-limited requests held back from the log: one summary line once the second is over.
    private func logDueRateLimits() {
        guard let count = rateLimitLog.due(nowMs: Clocks.monotonicMilliseconds()) else { return }
        host.logger.info("rate limited", metadata: ["count": "\(count)"])
    }

    /// The slow hash runs off the loop so the loop keeps serving; an unknown user is
    /// checked against a dummy hash so both failures cost the same ([8-4]).
    private func verifyPassword(_ login: Login, storedHash: String?, peer: Peer, correlation: UInt32, startNs: UInt64) {
        let handle = loop.handle
        let box = LoopBound(peer, loop: loop)
        let server = LoopBound(self, loop: loop)
        let password = login.password
        let iterations = logic.settings.passwordIterations
        DispatchQueue.global().async {
            let hash = storedHash.flatMap(PasswordHash.init(encoded:))
            let matched = (hash ?? PasswordHash.dummy(iterations: iterations)).verify(password: password) && hash != nil
            _ = handle.executeWithLoop { _ in
                let peer = box.value, server = server.value
                server.logins -= 1
                if peer.connection.isOpen, let session = peer.state {
                    server.perform(server.logic.passwordChecked(login, matched: matched, session: session), for: .login(login),
                                   requester: .wire(peer, correlation: correlation), startNs: startNs)
                }
                server.host.finishDrainIfDone()
            }
        }
    }

    private var loop: EventLoop { host.loop }

    /// Called on the loop with a group the writer committed (or failed to).
    public func deliverCommitted(tickets: [UInt64], outcomes: [WriteOutcome]?) {
        if outcomes == nil {
            // On several loops every loop hears of a failed group; the first speaks for them.
            if speaksForProcess {
                host.logger.error("group commit failed", metadata: ["requests": "\(tickets.count)"])
                metrics.commitFailures.increment()
            }
            lastCommitFailureMs = Clocks.monotonicMilliseconds()
        }
        for (index, ticket) in tickets.enumerated() where ticket != 0 {
            guard let pending = awaitingCommit.removeValue(forKey: ticket) else { continue }
            let outcome = outcomes?[index] ?? .failed(.internalError)
            if case .sendOK(_, _, _, let key?) = pending.reply { logic.sendCommitted(key) }
            if case .stored(let sequence, _) = outcome {
                switch pending.reply {
                case .storeOK(let stored):
                    backend.stored(stored.id, sequence: sequence)
                case .sendOK(let sent, let push, let createdAt, _):
                    backend.stored(sent.id, sequence: sequence)
                    forwarder?.committed(OutboxEntry(sequence: sequence, push: push, expiresAt: sent.expiresAt, createdAt: createdAt))
                default:
                    break
                }
            }
            if case .ok = outcome, case .recallOK(let id) = pending.reply { logic.recalled(id) }
            let reply = pending.reply.message(for: outcome)
            respond(reply, to: pending.requester, createdAt: pending.reply.createdAt)
            metrics.answered(pending.type, with: reply, startNs: pending.startNs)
            if case .stored = outcome { metrics.payloadsStored.increment() }
        }
        host.finishDrainIfDone()
    }
}
