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
    private let committer: GroupCommitWriter
    private var awaitingCommit: [GroupCommitWriter.Ticket: (Peer, UInt32, CommittedReply)] = [:]
    private var nextTicket: GroupCommitWriter.Ticket = 1
    private var logins = 0
    private var tallyTimer: LoopTimer?
    static let maxTalliesPerBatch = 4096
    /// Requests the store serves ([4.1-4]).
    public static let served: Set<MessageType> = [.login, .store, .fetch, .sync, .ack, .recall, .status]

    public var hasPendingWork: Bool { !awaitingCommit.isEmpty || logins > 0 }

    /// - Parameter committer: its deliveries must come back through `deliverCommitted` on this loop.
    public init(loop: EventLoop, limits: ServiceLimits, logger: Logger, logic: StoreLogic, committer: GroupCommitWriter) {
        self.logic = logic
        self.committer = committer
        host = ServiceHost(loop: loop, limits: limits, logger: logger, handler: self)
        tallyTimer = loop.schedule(after: .milliseconds(200), repeating: true) { [weak self] in self?.flushFetchTallies() }
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
        if let (status, text) = logic.admit(hello) { return .refuse(status, text) }
        return .admit(StoreSession(peerAddress: peer.peerHost, role: hello.role))
    }

    public func closed(_ peer: Peer, reason: CloseReason) {
        host.logger.debug("connection closed", metadata: ["peer": "\(peer.peerHost)", "reason": "\(reason)"])
    }

    public func serve(_ message: Message, correlation: UInt32, peer: Peer) {
        guard let session = peer.state else { return }
        perform(logic.handle(message, session: session), peer: peer, correlation: correlation)
    }

    private func perform(_ action: StoreAction, peer: Peer, correlation: UInt32) {
        switch action {
        case .reply(let message):
            host.respond(message, correlation: correlation, to: peer)
            if logic.pendingFetchTallies >= StoreServer.maxTalliesPerBatch { flushFetchTallies() }

        case .commit(let operation, let reply):
            let ticket = nextTicket
            nextTicket += 1
            awaitingCommit[ticket] = (peer, correlation, reply)
            committer.submit(operation, ticket: ticket)
        case .verifyPassword(let login, let storedHash):
            logins += 1
            verifyPassword(login, storedHash: storedHash, peer: peer, correlation: correlation)
        }
    }

    /// The slow hash runs off the loop so the loop keeps serving; an unknown user is
    /// checked against a dummy hash so both failures cost the same ([8-4]).
    private func verifyPassword(_ login: Login, storedHash: String?, peer: Peer, correlation: UInt32) {
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
                    server.host.respond(server.logic.finishLogin(login, passwordMatched: matched, session: session), correlation: correlation, to: peer)
                }
                server.host.finishDrainIfDone()
            }
        }
    }

    private var loop: EventLoop { host.loop }

    /// Called on the loop with a group the writer committed (or failed to).
    public func deliverCommitted(tickets: [GroupCommitWriter.Ticket], outcomes: [WriteOutcome]?) {
        if outcomes == nil { host.logger.error("group commit failed", metadata: ["requests": "\(tickets.count)"]) }
        for (index, ticket) in tickets.enumerated() where ticket != 0 {
            guard let (peer, correlation, reply) = awaitingCommit.removeValue(forKey: ticket) else { continue }
            host.respond(logic.completed(reply, outcome: outcomes?[index] ?? .failed(.internalError)), correlation: correlation, to: peer)
        }
        host.finishDrainIfDone()
    }
}
