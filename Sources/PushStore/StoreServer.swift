import Dispatch
import Logging
import PushEventLoop
import PushSecurity
import PushWire

/// The store as a network service: accepts connections on its loop, decodes frames,
/// hands messages to `StoreLogic` and carries out the actions it returns. Loop-confined.
public final class StoreServer {
    public let loop: EventLoop
    let logic: StoreLogic
    private let committer: GroupCommitWriter
    private let logger: Logger
    private var listener: Listener?
    private var connections: [ObjectIdentifier: StoreConnection] = [:]
    private var awaitingCommit: [GroupCommitWriter.Ticket: (StoreConnection, UInt32, CommittedReply)] = [:]
    private var nextTicket: GroupCommitWriter.Ticket = 1
    private var keepaliveTimer: LoopTimer?
    private var drainingSince: Int64?
    private var onStopped: (() -> Void)?

    public var port: Int? { listener?.port }
    public var connectionCount: Int { connections.count }

    /// - Parameter committer: started here; its deliveries must come back through `deliverCommitted`.
    public init(loop: EventLoop, logic: StoreLogic, committer: GroupCommitWriter, logger: Logger) {
        self.loop = loop
        self.logic = logic
        self.committer = committer
        self.logger = logger
    }

    public func listen(host: String, port: Int, tls: TLSContext?) throws(EventLoopError) {
        listener = try Listener(loop: loop, host: host, port: port, tls: tls) { [unowned self] connection in
            self.accept(connection)
        }
        let tick = Duration.milliseconds(max(250, Int64(logic.settings.keepaliveMs) / 4))
        keepaliveTimer = loop.schedule(after: tick, repeating: true) { [unowned self] in self.checkKeepalive() }
    }

    private func accept(_ connection: Connection) {
        let session = StoreSession(peerAddress: connection.peerAddress?.host ?? "?")
        session.overConnectionLimit = connections.count >= logic.settings.maxConnections
        let handler = StoreConnection(server: self, connection: connection, session: session)
        connection.handler = handler
        connections[ObjectIdentifier(handler)] = handler
    }

    fileprivate func closed(_ handler: StoreConnection, reason: CloseReason) {
        connections[ObjectIdentifier(handler)] = nil
        logger.debug("connection closed", metadata: ["peer": "\(handler.session.peerAddress)", "reason": "\(reason)"])
        if drainingSince != nil { finishDrainIfDone() }
    }

    // MARK: frames

    fileprivate func frame(_ handler: StoreConnection, header: FrameHeader, body: UnsafeRawBufferPointer) {
        handler.lastRequest = max(handler.lastRequest, header.correlation)
        let message: Message
        do {
            message = try Message.decode(header: header, body: body)
        } catch {
            refuseUndecodable(handler, header: header, error: error)
            return
        }
        if drainingSince != nil, message.type != .pong { return }
        let needsSlot = message.type == .store || message.type == .ack || message.type == .recall || message.type == .login
        if needsSlot, handler.session.pending >= Int(handler.session.maxInflight) {
            handler.send(.error(ErrorReply(status: .busy, message: "more than max_inflight requests outstanding")), correlation: header.correlation)
            return
        }
        perform(logic.handle(message, session: handler.session), for: handler, correlation: header.correlation)
    }

    private func refuseUndecodable(_ handler: StoreConnection, header: FrameHeader, error: WireError) {
        guard handler.session.role != nil else {
            // Before the handshake only a well-formed HELLO is acceptable ([5.1-2], [5.1-3]).
            if header.type == .hello {
                handler.send(.error(ErrorReply(status: error.status, message: error.description)), correlation: header.correlation)
                handler.connection.closeAfterFlush()
            } else {
                handler.goaway(.helloRequired, "the first frame must be HELLO")
            }
            return
        }
        // Never ERROR about a reply or a one-way message; a GOAWAY ends the connection
        // even when malformed ([5.6-3]).
        if let type = header.type, !type.isRequest {
            if type == .goaway { handler.connection.close() }
            return
        }
        handler.send(.error(ErrorReply(status: error.status, message: error.description)), correlation: header.correlation)
    }

    private func perform(_ action: StoreAction, for handler: StoreConnection, correlation: UInt32) {
        switch action {
        case .reply(let message):
            handler.send(message, correlation: correlation)
        case .replyAndRecord(let message, let record):
            handler.send(message, correlation: correlation)
            committer.submit(record, ticket: 0)
        case .helloAccepted(let accepted):
            handler.send(.helloOK(accepted), correlation: correlation)
            handler.connection.maxFrame = Int(accepted.maxFrame)
            handler.keepaliveMs = Int64(accepted.keepaliveMs)
        case .refuseHello(let status, let text):
            handler.send(.error(ErrorReply(status: status, message: text)), correlation: correlation)
            handler.connection.closeAfterFlush()
        case .fatal(let status, let text):
            handler.goaway(status, text)
        case .commit(let operation, let reply):
            let ticket = nextTicket
            nextTicket += 1
            awaitingCommit[ticket] = (handler, correlation, reply)
            handler.session.pending += 1
            committer.submit(operation, ticket: ticket)
        case .verifyPassword(let login, let storedHash):
            handler.session.pending += 1
            verifyPassword(login, storedHash: storedHash, handler: handler, correlation: correlation)
        case .none:
            break
        }
    }

    /// The slow hash runs on its own thread so the loop keeps serving; an unknown user
    /// is checked against a dummy hash so both failures cost the same ([8-4]).
    private func verifyPassword(_ login: Login, storedHash: String?, handler: StoreConnection, correlation: UInt32) {
        let handle = loop.handle
        let box = LoopBound(handler, loop: loop)
        let password = login.password
        DispatchQueue.global().async {
            let hash = storedHash.flatMap(PasswordHash.init(encoded:))
            let matched = (hash ?? PasswordHash.dummy).verify(password: password) && hash != nil
            _ = handle.executeWithLoop { _ in
                let handler = box.value
                handler.session.pending -= 1
                guard handler.connection.isOpen else { return }
                handler.send(handler.server.logic.finishLogin(login, passwordMatched: matched, session: handler.session), correlation: correlation)
            }
        }
    }

    /// Called on the loop with a group the writer committed (or failed to).
    public func deliverCommitted(tickets: [GroupCommitWriter.Ticket], outcomes: [WriteOutcome]?) {
        if outcomes == nil { logger.error("group commit failed; replying INTERNAL to \(tickets.count) requests") }
        for (index, ticket) in tickets.enumerated() where ticket != 0 {
            guard let (handler, correlation, reply) = awaitingCommit.removeValue(forKey: ticket) else { continue }
            handler.session.pending -= 1
            let outcome = outcomes?[index] ?? .failed(.internalError)
            handler.send(reply.message(for: outcome), correlation: correlation)
        }
        if drainingSince != nil { finishDrainIfDone() }
    }

    // MARK: keepalive and shutdown

    private func checkKeepalive() {
        let now = EventLoop.monotonicMilliseconds()
        for handler in connections.values {
            let keepalive = handler.session.role == nil ? 30_000 : handler.keepaliveMs
            guard keepalive > 0 else { continue }
            if now - handler.connection.lastReadMillis > keepalive * 3 / 2 {
                handler.goaway(.timeout, "no bytes for 1.5 x keepalive")
            } else if handler.session.role != nil, now - handler.lastWriteMillis > keepalive {
                handler.send(.ping, correlation: handler.nextPing())
            }
        }
        if let since = drainingSince, now - since > 10_000 {
            logger.warning("drain timed out; closing \(connections.count) connections")
            for handler in connections.values { handler.connection.close() }
            finishDrainIfDone()
        }
    }

    /// Graceful stop ([5.5-1]): no new connections, GOAWAY SHUTTING_DOWN to every
    /// connection, replies for what was already accepted once its commit lands, then close.
    public func drain(then stopped: @escaping () -> Void) {
        guard drainingSince == nil else { return }
        drainingSince = EventLoop.monotonicMilliseconds()
        onStopped = stopped
        listener?.close()
        for handler in connections.values {
            handler.send(.goaway(Goaway(status: .shuttingDown, lastCorrelation: handler.lastRequest, message: "store shutting down")), correlation: 0)
            handler.connection.pauseReading()
        }
        finishDrainIfDone()
    }

    private func finishDrainIfDone() {
        guard awaitingCommit.isEmpty else { return }
        for handler in connections.values where handler.connection.isOpen {
            handler.connection.closeAfterFlush(timeout: .seconds(2))
        }
        guard connections.isEmpty, let stopped = onStopped else { return }
        onStopped = nil
        keepaliveTimer?.cancel()
        stopped()
    }
}

/// One client connection of the store.
final class StoreConnection: ConnectionHandler {
    unowned let server: StoreServer
    let connection: Connection
    let session: StoreSession
    var keepaliveMs: Int64 = 30_000
    var lastWriteMillis = EventLoop.monotonicMilliseconds()
    /// Highest request correlation id seen, for GOAWAY's last_correlation.
    var lastRequest: UInt32 = 0
    private var pingCorrelation: UInt32 = 0
    private var scratch: [UInt8] = []

    init(server: StoreServer, connection: Connection, session: StoreSession) {
        self.server = server
        self.connection = connection
        self.session = session
    }

    func send(_ message: Message, correlation: UInt32) {
        scratch.removeAll(keepingCapacity: true)
        message.encode(correlation: correlation, into: &scratch)
        connection.write(scratch)
        lastWriteMillis = EventLoop.monotonicMilliseconds()
        if scratch.capacity > 64 * 1024 { scratch = [] }
    }

    func goaway(_ status: Status, _ text: String) {
        send(.goaway(Goaway(status: status, lastCorrelation: lastRequest, message: text)), correlation: 0)
        connection.closeAfterFlush(timeout: .seconds(2))
    }

    func nextPing() -> UInt32 {
        pingCorrelation &+= 1
        return pingCorrelation
    }

    func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) {
        server.frame(self, header: header, body: body)
    }

    func onFramingError(_ connection: Connection, error: WireError) {
        goaway(error.status, error.description)
    }

    func onBackpressure(_ connection: Connection) -> BackpressureAction { .close }

    func onClose(_ connection: Connection, reason: CloseReason) {
        server.closed(self, reason: reason)
    }
}
