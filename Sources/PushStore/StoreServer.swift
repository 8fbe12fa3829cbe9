import Dispatch
import Logging
import PushEventLoop
import PushSecurity
import PushService
import PushSession
import PushWire

/// The store as a network service: `ServiceHost` runs the connection lifecycle, this
/// carries out what `StoreLogic` decides. Loop-confined.
public final class StoreServer: ServiceHandler {
    public typealias Peer = ServicePeer<StoreServer>
    /// Set once in `init`; the server owns its host.
    public private(set) var host: ServiceHost<StoreServer>!
    let logic: StoreLogic
    public let metrics: StoreMetrics
    private let committer: GroupCommitWriter
    private var awaitingCommit: [GroupCommitWriter.Ticket: PendingCommit] = [:]
    private var nextTicket: GroupCommitWriter.Ticket = 1
    private var logins = 0
    private var tallyTimer: LoopTimer?
    private var rateLimitLog = LogThrottle()
    /// When the last group commit failed (monotonic ms), if one has; readiness looks at it.
    public private(set) var lastCommitFailureMs: Int64?

    /// A request whose reply waits for its write to be durable.
    private struct PendingCommit {
        var peer: Peer
        var correlation: UInt32
        var reply: CommittedReply
        var type: MessageType
        var startNs: UInt64
    }
    static let maxTalliesPerBatch = 4096
    /// Requests the store serves ([4.1-4]).
    public static let served: Set<MessageType> = [.login, .store, .fetch, .sync, .ack, .recall, .status]

    public var hasPendingWork: Bool { !awaitingCommit.isEmpty || logins > 0 }

    /// - Parameter committer: its deliveries must come back through `deliverCommitted` on this loop.
    public init(loop: EventLoop, limits: ServiceLimits, logger: Logger, logic: StoreLogic, committer: GroupCommitWriter,
                metrics: StoreMetrics = StoreMetrics()) {
        self.logic = logic
        self.committer = committer
        self.metrics = metrics
        host = ServiceHost(loop: loop, limits: limits, logger: logger, handler: self)
        tallyTimer = loop.schedule(after: .milliseconds(200), repeating: true) { [weak self] in
            self?.flushFetchTallies()
            self?.logDueRateLimits()
        }
    }

    /// Cancels the tally timer, which holds the server only weakly; after a drain or a failed start.
    public func stopTimers() {
        tallyTimer?.cancel()
        tallyTimer = nil
    }

    /// One writer operation for many FETCHes instead of one UPDATE each.
    public func flushFetchTallies() {
        let tallies = logic.takeFetchTallies()
        if !tallies.isEmpty { committer.submit(.recordFetches(tallies), ticket: 0) }
    }

    public func admit(_ hello: Hello, peer: Peer) -> Admission<StoreSession> {
        if case .refuse(let status, let reply, let reason) = logic.admit(hello) { return .refuse(status, reply, logDetail: reason) }
        return .admit(StoreSession(peerAddress: peer.peerHost, role: hello.role))
    }

    public func closed(_ peer: Peer, reason: CloseReason) {
        host.logger.debug("connection closed", metadata: ["peer": "\(peer.peerHost)", "reason": "\(reason)"])
    }

    public func serve(_ message: Message, correlation: UInt32, peer: Peer) {
        guard let session = peer.state else { return }
        let startNs = Clocks.monotonicNanoseconds()
        perform(logic.handle(message, session: session), for: message, peer: peer, correlation: correlation, startNs: startNs)
    }

    private func perform(_ action: StoreAction, for request: Message, peer: Peer, correlation: UInt32, startNs: UInt64) {
        switch action {
        case .reply(let message):
            host.respond(message, correlation: correlation, to: peer)
            answered(request, with: message, peer: peer, startNs: startNs)
            if logic.pendingFetchTallies >= StoreServer.maxTalliesPerBatch { flushFetchTallies() }

        case .commit(let operation, let reply):
            let ticket = nextTicket
            nextTicket += 1
            awaitingCommit[ticket] = PendingCommit(peer: peer, correlation: correlation, reply: reply, type: request.type, startNs: startNs)
            committer.submit(operation, ticket: ticket)
        case .verifyPassword(let login, let storedHash):
            logins += 1
            verifyPassword(login, storedHash: storedHash, peer: peer, correlation: correlation, startNs: startNs)
        }
    }

    /// Counts a reply and logs what an operator watches for: failed logins (the user and
    /// the address, never the password) and rate-limited requests.
    private func answered(_ request: Message, with reply: Message, peer: Peer, startNs: UInt64) {
        metrics.answered(request.type, with: reply, startNs: startNs)
        guard case .error(let error) = reply else { return }
        let login: Login? = if case .login(let login) = request { login } else { nil }
        switch error.status {
        case .badCredentials where login != nil:
            metrics.loginsFailed.increment()
            host.logger.info("login failed", metadata: ["user": "\(login?.user ?? "")", "peer": "\(peer.peerHost)",
                                                        "device": "\(login?.deviceID ?? "")"])
        case .rateLimited:
            guard let count = rateLimitLog.event(nowMs: Clocks.monotonicMilliseconds()) else { return }
            var metadata: Logger.Metadata = ["request": "\(request.type.specName)", "peer": "\(peer.peerHost)",
                                             "reason": "\(error.message ?? "")"]
            if let login { metadata["user"] = "\(login.user)" }
            if count > 1 { metadata["count"] = "\(count)" }
            host.logger.info("rate limited", metadata: metadata)
        default:
            break
        }
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
        DispatchQueue.global().async {
            let hash = storedHash.flatMap(PasswordHash.init(encoded:))
            let matched = (hash ?? PasswordHash.dummy).verify(password: password) && hash != nil
            _ = handle.executeWithLoop { _ in
                let peer = box.value, server = server.value
                server.logins -= 1
                if peer.connection.isOpen, let session = peer.state {
                    let reply = server.logic.finishLogin(login, passwordMatched: matched, session: session)
                    server.host.respond(reply, correlation: correlation, to: peer)
                    server.answered(.login(login), with: reply, peer: peer, startNs: startNs)
                }
                server.host.finishDrainIfDone()
            }
        }
    }

    private var loop: EventLoop { host.loop }

    /// Called on the loop with a group the writer committed (or failed to).
    public func deliverCommitted(tickets: [GroupCommitWriter.Ticket], outcomes: [WriteOutcome]?) {
        if outcomes == nil {
            host.logger.error("group commit failed", metadata: ["requests": "\(tickets.count)"])
            metrics.commitFailures.increment()
            lastCommitFailureMs = Clocks.monotonicMilliseconds()
        }
        for (index, ticket) in tickets.enumerated() where ticket != 0 {
            guard let pending = awaitingCommit.removeValue(forKey: ticket) else { continue }
            let outcome = outcomes?[index] ?? .failed(.internalError)
            let reply = logic.completed(pending.reply, outcome: outcome)
            host.respond(reply, correlation: pending.correlation, to: pending.peer)
            metrics.answered(pending.type, with: reply, startNs: pending.startNs)
            if case .stored = outcome { metrics.payloadsStored.increment() }
        }
        host.finishDrainIfDone()
    }
}
