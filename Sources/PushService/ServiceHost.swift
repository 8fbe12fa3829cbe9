#if canImport(Glibc)
import Glibc
#endif
import Logging
import PushClock
import PushEventLoop
import PushSession
import PushWire

/// How a service answers HELLO's credential check.
public enum Admission<State> {
    case admit(State)
    /// ERROR with this status and text to the peer; `logDetail`, if any, goes only to the
    /// log line about the refusal (why a credential failed, say).
    case refuse(Status, String, logDetail: String? = nil)
    /// The peer is to be served by another of the process's loops: the host lets go of the
    /// connection, with its HELLO put back in front of whatever followed it, and hands it
    /// to this closure (on this loop) to pass on. See `Connection.handOff`.
    case handOff((ConnectionHandoff) -> Void)
    /// Not decided yet: the service answers later with `ServiceHost.decide`. Meanwhile the
    /// peer keeps its place under the connection cap, gets no reply, and its handshake
    /// deadline runs on ([5.1-1]: it sends nothing before HELLO_OK).
    case wait
}

/// What a service (store, gateway) adds to the connection rules of `PeerSession`.
public protocol ServiceHandler: AnyObject {
    /// What the service keeps per admitted peer.
    associatedtype PeerState

    /// HELLO passed negotiation: check the credential.
    func admit(_ hello: Hello, peer: ServicePeer<Self>) -> Admission<PeerState>
    /// Right after HELLO_OK has been queued.
    func admitted(_ peer: ServicePeer<Self>)
    /// A request that passed the role, service and max_inflight checks. The service
    /// answers it exactly once, with `ServiceHost.respond`.
    func serve(_ message: Message, correlation: UInt32, peer: ServicePeer<Self>)
    /// A reply or one-way message from the peer (a DELIVERY_ACK); never answered ([5.6-3]).
    func received(_ message: Message, correlation: UInt32, peer: ServicePeer<Self>)
    /// Called for admitted peers only.
    func closed(_ peer: ServicePeer<Self>, reason: CloseReason)
    /// The host's periodic sweep reached this admitted, open peer (after the session's own
    /// deadlines): for a rule of the service's that is checked periodically (the gateway's
    /// output stall, [5.5-7]). `nowMs` is `Clocks.monotonicMilliseconds()`.
    func swept(_ peer: ServicePeer<Self>, nowMs: Int64)
    /// True while accepted work not tied to one connection is unfinished; a drain waits for it.
    var hasPendingWork: Bool { get }
}

extension ServiceHandler {
    public func admitted(_ peer: ServicePeer<Self>) {}
    public func received(_ message: Message, correlation: UInt32, peer: ServicePeer<Self>) {}
    public func swept(_ peer: ServicePeer<Self>, nowMs: Int64) {}
    public var hasPendingWork: Bool { false }
}

/// Drives one `PeerSession` per accepted connection: it feeds the session what the
/// socket and the clock report and carries out the actions it returns, handing the
/// service only admitted requests. Loop-confined.
public final class ServiceHost<Handler: ServiceHandler> {
    public typealias Peer = ServicePeer<Handler>

    public let loop: EventLoop
    public let limits: ServiceLimits
    public let logger: Logger
    /// The service that owns this host.
    public unowned let handler: Handler
    private var listener: Listener?
    private var peers: [ObjectIdentifier: Peer] = [:]
    private var sweepTimer: LoopTimer?
    private var drainingSince: Int64?
    private var isDrained = false
    private var whenDrained: [() -> Void] = []
    /// One encode buffer for the whole loop: a frame is written before the next encode.
    /// No dynamic exclusivity check (loop-confined): without it each PUSH_ACK pays two,
    /// 117 instructions of the gateway's 11.2k a push, 1.0 % (callgrind, gateway under
    /// `bench push --devices 1000`, 52,000 minus 2,000 pushes, release build).
    @exclusivity(unchecked) private var scratch: [UInt8] = []
    /// Connections by stage (pending HELLO_OK, admitted), the caps on each, and refusals.
    private let admission: AdmissionGate
    /// Whether `admission` is this host's alone (not shared with other loops' hosts).
    let ownsAdmission: Bool
    private var acceptErrorLoggedAt: Int64 = .min / 2
    /// HELLOs the service refused (a bad credential, say), by status, and their log lines.
    private var helloRefusalCounts: [Status: Int] = [:]
    /// Peers whose HELLO the service answered `.wait`, with that HELLO.
    private var awaitingDecision: [ObjectIdentifier: (hello: Hello, correlation: UInt32)] = [:]
    var awaitingDecisionCount: Int { awaitingDecision.count }
    private var helloRefusalLog = LogThrottle()

    public var port: Int? { listener?.port }
    /// Every address the listener is bound to (a name may resolve to several), as HOST:PORT.
    public var listeningAddresses: [String] { listener?.addresses.map(\.description) ?? [] }
    /// Open connections, admitted or still in the handshake.
    public var connectionCount: Int { peers.count }
    /// Connections accepted and not yet past HELLO_OK.
    public var pendingHandshakeCount: Int { admission.pendingCount }
    /// Peers past HELLO_OK: what `ServiceLimits.maxConnections` caps.
    public var admittedCount: Int { admission.admittedCount }
    /// Connections refused (or closed before HELLO_OK) for `reason` since the start.
    public func refusals(_ reason: ConnectionRefusal) -> Int { admission.refusals(reason) }
    /// Told of each refusal and each change in the number of pending handshakes (metrics).
    public var admissionObserver: ((AdmissionEvent) -> Void)?
    public var isDraining: Bool { drainingSince != nil }
    /// Whether the listener is open (it closes when a drain starts).
    public var isListening: Bool { listener?.isOpen ?? false }
    /// HELLOs the service's credential check refused since the start, by the status sent.
    public var helloRefusals: [Status: Int] { helloRefusalCounts }
    /// Outbound bytes allowed to queue per connection before it is cut off ([5.5-4]).
    public var maxOutputBytes = Connection.defaultMaxOutputBytes
    /// A time of the service's own that the sweep must also meet within a quarter of it
    /// (`ServiceHandler.swept`); 0 for none. Set before listening.
    public var serviceDeadlineMs: Int64 = 0
    /// How long a drain waits for owed replies before closing what is left.
    public var drainTimeoutMs: Int64 = 10_000
    /// Shown every frame a peer sends, as it arrived, before the session judges it, every
    /// framing error and every close: for a harness that grades clients by what they put on the wire
    /// (`securepush conformance --client`). A frame it answers false for is dropped unseen by
    /// the session (a server that has gone silent). Nil in the services.
    public var frameObserver: ((Peer, FrameObservation) -> Bool)?

    /// - Parameter admission: the caps shared with the hosts of the process's other loops;
    ///   nil gives this host caps of its own.
    public init(loop: EventLoop, limits: ServiceLimits, logger: Logger, handler: Handler, admission: AdmissionGate? = nil) {
        self.loop = loop
        self.limits = limits
        self.logger = logger
        self.handler = handler
        self.admission = admission ?? AdmissionGate(limits: limits)
        ownsAdmission = admission == nil
    }

    /// Listens on `host`:`port`; `dispatch` may take accepted sockets to another loop (see
    /// `Listener.dispatch`).
    public func listen(host: String, port: Int, tls: TLSContext?, dispatch: ((Int32) -> Bool)? = nil) throws(EventLoopError) {
        serve(try Listener(loop: loop, host: host, port: port, tls: tls) { [weak self] connection in self?.accept(connection) },
              dispatch: dispatch)
    }

    /// Accepts on the sockets another loop's host listens on (see `shareListener`).
    public func listen(sharing sockets: SharedListenSockets, dispatch: ((Int32) -> Bool)? = nil) throws(EventLoopError) {
        serve(try Listener(loop: loop, sharing: sockets) { [weak self] connection in self?.accept(connection) }, dispatch: dispatch)
    }

    /// Serves a socket another loop's listener accepted and placed here. Call on this loop.
    public func takeOver(acceptedSocket fd: Int32) {
        guard let listener else {
            Glibc.close(fd)
            return
        }
        listener.takeOver(fd)
    }

    /// What another loop needs to accept on this host's listening sockets too.
    public func shareListener() throws(EventLoopError) -> SharedListenSockets {
        guard let listener else { throw .libevent("not listening") }
        return try listener.sharedSockets()
    }

    private func serve(_ listener: Listener, dispatch: ((Int32) -> Bool)?) {
        listener.dispatch = dispatch
        listener.onRefused = { [weak self] code, count in
            guard let self else { return }
            for _ in 0..<count { self.refused(.outOfFileDescriptors, peerHost: "?", detail: code == ENFILE ? "ENFILE" : "EMFILE") }
        }
        listener.onAcceptError = { [weak self] error in
            guard let self else { return }
            // The listener retries every 100 ms while it lasts: one line a second at most.
            let now = Clocks.monotonicMilliseconds()
            guard now - self.acceptErrorLoggedAt >= 1_000 else { return }
            self.acceptErrorLoggedAt = now
            self.logger.warning("accept failed", metadata: ["error": "\(error)"])
        }
        self.listener = listener
        sweepTimer = loop.schedule(after: .milliseconds(sweepIntervalMs), repeating: true) { [weak self] in self?.sweep() }
    }

    /// Often enough that every deadline is met within a quarter of its length.
    var sweepIntervalMs: Int64 {
        var shortest = min(limits.timeouts.handshakeMs, limits.timeouts.frameMs)
        if limits.keepaliveMs > 0 { shortest = min(shortest, Int64(limits.keepaliveMs)) }
        if serviceDeadlineMs > 0 { shortest = min(shortest, serviceDeadlineMs) }
        return max(100, min(1_000, shortest / 4))
    }

    /// Starts a session on a connection accepted elsewhere (a test, another listener).
    /// A connection over a pending-handshake cap is closed at once, with no reply.
    public func accept(_ connection: Connection) {
        let address = connection.peerAddress?.host ?? "?"
        if let refusal = admission.arrived(ObjectIdentifier(connection), from: address) {
            connection.close()
            refused(refusal, peerHost: address)
            return
        }
        // The connection limit applies at HELLO, to admitted peers only (see `admit`).
        let session = PeerSession<Handler.PeerState>(side: .server(limits, overConnectionLimit: false),
                                                     now: Clocks.monotonicMilliseconds())
        let peer = Peer(host: self, connection: connection, session: session)
        connection.maxOutputBytes = maxOutputBytes
        // Until HELLO_OK only a frame that fits a HELLO is read; `admit` raises the limit.
        connection.maxFrame = min(ServiceLimits.maxFrameBeforeHello, limits.maxFrame)
        connection.handler = peer
        peers[ObjectIdentifier(peer)] = peer
        admissionObserver?(.pendingHandshakes(admission.pendingCount))
    }

    /// Counts a refusal and logs it, one line per second per reason at most.
    private func refused(_ reason: ConnectionRefusal, peerHost: String, detail: String? = nil) {
        admissionObserver?(.refused(reason))
        guard let count = admission.refused(reason, now: Clocks.monotonicMilliseconds()) else { return }
        logRefusals(reason, count: count, peerHost: peerHost, detail: detail)
    }

    private func logRefusals(_ reason: ConnectionRefusal, count: Int, peerHost: String?, detail: String? = nil) {
        var metadata: Logger.Metadata = ["reason": "\(reason.rawValue)", "count": "\(count)",
                                         "total": "\(admission.refusals(reason))",
                                         "pending": "\(admission.pendingCount)", "admitted": "\(admission.admittedCount)"]
        if let peerHost { metadata["peer"] = "\(peerHost)" }
        if let detail { metadata["errno"] = "\(detail)" }
        logger.info("connection refused", metadata: metadata)
    }

    // MARK: writing

    /// Answers a request the service was handed; it frees the request's in-flight slot.
    /// False if the connection is closed or was cut off.
    @discardableResult
    public func respond(_ message: Message, correlation: UInt32, to peer: Peer) -> Bool {
        answer(peer) { write(message, correlation: correlation, to: peer) }
    }

    /// `respond` for a PUSH_ACK, written straight into the scratch buffer.
    @discardableResult
    public func respond(_ ack: PushAck, correlation: UInt32, to peer: Peer) -> Bool {
        answer(peer) {
            scratch.removeAll(keepingCapacity: true)
            ack.encode(correlation: correlation, into: &scratch)
            return peer.connection.write(scratch)
        }
    }

    /// Frees the request's in-flight slot, writes the reply, and closes a draining peer
    /// that owes nothing more.
    @inline(__always)
    private func answer(_ peer: Peer, write: () -> Bool) -> Bool {
        peer.session.answered(now: Clocks.monotonicMilliseconds())
        let written = write()
        if peer.session.phase == .draining, peer.session.isDrained { closeDrained(peer) }
        return written
    }

    /// A frame the server starts (PUSH, MISSED). Over the output cap it cuts the peer
    /// off as a slow consumer; replies only pause reading (see `ServicePeer.onBackpressure`).
    @discardableResult
    public func send(_ message: Message, correlation: UInt32, to peer: Peer) -> Bool {
        peer.session.sent(now: Clocks.monotonicMilliseconds())
        peer.writingOwnFrame = true
        defer { peer.writingOwnFrame = false }
        return write(message, correlation: correlation, to: peer)
    }

    /// An already encoded frame the server starts (a fan-out writes the same bytes to many peers).
    @discardableResult
    public func sendEncoded(_ frame: [UInt8], to peer: Peer) -> Bool {
        peer.session.sent(now: Clocks.monotonicMilliseconds())
        peer.writingOwnFrame = true
        defer { peer.writingOwnFrame = false }
        return peer.connection.write(frame)
    }

    /// Ends a connection with a fatal status (REPLACED, say): GOAWAY, then close.
    public func goaway(_ peer: Peer, _ status: Status, _ text: String) {
        perform(peer.session.goaway(status, text), on: peer)
    }

    /// Cuts a slow consumer off ([5.5-4]): GOAWAY SLOW_CONSUMER goes past the output cap
    /// (a peer that catches up reads why), then the connection closes once its output is
    /// read, or after `timeout` without progress. The close is reported as `.local`, not
    /// `.slowConsumer` (which is the connection's own cut, when a write passes the cap).
    public func cutOff(_ peer: Peer, _ text: String, timeout: Duration = .seconds(1)) {
        guard case .sendAndClose(let message, let correlation) = peer.session.goaway(.slowConsumer, text) else {
            return peer.connection.close(reason: .slowConsumer)
        }
        // A frame past the cap that is not the server's own only pauses reading
        // (`ServicePeer.onBackpressure`), which a closing connection does anyway.
        write(message, correlation: correlation, to: peer)
        peer.connection.closeAfterFlush(reason: .local, timeout: timeout)
    }

    private func write(_ message: Message, correlation: UInt32, to peer: Peer) -> Bool {
        scratch.removeAll(keepingCapacity: true)
        message.encode(correlation: correlation, into: &scratch)
        let written = peer.connection.write(scratch)
        if scratch.capacity > 256 * 1024 { scratch = [] }
        return written
    }

    // MARK: carrying out the session's actions

    fileprivate func perform(_ action: SessionAction, on peer: Peer) {
        switch action {
        case .none:
            break
        case .send(let message, let correlation):
            peer.session.sent(now: Clocks.monotonicMilliseconds())
            write(message, correlation: correlation, to: peer)
        case .sendAndClose(let message, let correlation):
            write(message, correlation: correlation, to: peer)
            peer.connection.closeAfterFlush(timeout: .seconds(2))
        case .close:
            peer.connection.close()
        case .serve(let message, let correlation):
            handler.serve(message, correlation: correlation, peer: peer)
        case .deliver(let message, let correlation):
            handler.received(message, correlation: correlation, peer: peer)
        case .checkCredential(let hello, let correlation):
            admit(hello, correlation: correlation, peer: peer)
        case .ready, .refused, .malformedReply, .goaway:
            break  // a client's actions
        }
    }

    private func admit(_ hello: Hello, correlation: UInt32, peer: Peer) {
        if let refusal = admission.reserveSlot() {
            refused(refusal, peerHost: peer.peerHost)
            perform(peer.session.refuse(.busy, "the server is at its connection limit"), on: peer)
            return
        }
        conclude(handler.admit(hello, peer: peer), hello: hello, correlation: correlation, peer: peer)
    }

    /// The service's answer to a HELLO it answered `.wait` before (`.wait` again keeps it
    /// waiting). Nothing happens for a peer that closed meanwhile, or was never waiting.
    public func decide(_ peer: Peer, _ admission: Admission<Handler.PeerState>) {
        guard let (hello, correlation) = awaitingDecision.removeValue(forKey: ObjectIdentifier(peer)) else { return }
        conclude(admission, hello: hello, correlation: correlation, peer: peer)
    }

    /// Carries out an answer to HELLO; the peer holds a reserved slot under the cap.
    private func conclude(_ decision: Admission<Handler.PeerState>, hello: Hello, correlation: UInt32, peer: Peer) {
        switch decision {
        case .refuse(let status, let text, let detail):
            admission.cancelReservation()
            helloRefused(hello, status: status, text: text, detail: detail, peerHost: peer.peerHost)
            perform(peer.session.refuse(status, text), on: peer)
        case .admit(let state):
            admission.admitted(ObjectIdentifier(peer.connection))
            admissionObserver?(.pendingHandshakes(admission.pendingCount))
            perform(peer.session.admit(state), on: peer)
            if let accepted = peer.session.negotiated { peer.connection.maxFrame = Int(accepted.maxFrame) }
            handler.admitted(peer)
        case .handOff(let destination):
            admission.cancelReservation()
            handOff(peer, hello: hello, correlation: correlation, to: destination)
        case .wait:
            awaitingDecision[ObjectIdentifier(peer)] = (hello, correlation)
        }
    }

    /// The connection leaves this host as if it had never been accepted: no `closed` for
    /// the service, no refusal counted. The receiving host starts a session of its own
    /// and reads the HELLO again.
    private func handOff(_ peer: Peer, hello: Hello, correlation: UInt32, to destination: @escaping (ConnectionHandoff) -> Void) {
        peers[ObjectIdentifier(peer)] = nil
        let id = ObjectIdentifier(peer.connection)
        if admission.isPending(id) {
            admission.closed(id)
            admissionObserver?(.pendingHandshakes(admission.pendingCount))
        }
        var frame: [UInt8] = []
        Message.hello(hello).encode(correlation: correlation, into: &frame)
        peer.connection.handOff(prepending: frame) { handoff in
            // Nil: it could not be detached and was closed instead (the client retries).
            if let handoff { destination(handoff) }
        }
        if drainingSince != nil { finishDrainIfDone() }
    }

    /// Counts a refused HELLO and logs it, one line per second at most (a peer can send
    /// bad credentials as fast as it can connect).
    private func helloRefused(_ hello: Hello, status: Status, text: String, detail: String?, peerHost: String) {
        helloRefusalCounts[status, default: 0] += 1
        guard let count = helloRefusalLog.event(nowMs: Clocks.monotonicMilliseconds()) else { return }
        var metadata: Logger.Metadata = ["peer": "\(peerHost)", "role": "\(hello.role)", "status": "\(status.name)",
                                         "reason": "\(detail ?? text)"]
        if count > 1 { metadata["count"] = "\(count)" }
        logger.info("hello refused", metadata: metadata)
    }

    fileprivate func closed(_ peer: Peer, reason: CloseReason) {
        let wasAdmitted = peer.session.state != nil
        peer.session.closed()
        peers[ObjectIdentifier(peer)] = nil
        if awaitingDecision.removeValue(forKey: ObjectIdentifier(peer)) != nil { admission.cancelReservation() }
        let id = ObjectIdentifier(peer.connection)
        let wasPending = admission.isPending(id)
        admission.closed(id)
        if wasPending { admissionObserver?(.pendingHandshakes(admission.pendingCount)) }
        if wasAdmitted { handler.closed(peer, reason: reason) }
        if drainingSince != nil { finishDrainIfDone() }
    }

    // MARK: timers and drain

    private func sweep() {
        let now = Clocks.monotonicMilliseconds()
        for peer in peers.values {
            let partialFrameSince = peer.partialFrameSinceMillis
            let action = peer.session.timerFired(now: now, lastReceivedAt: peer.lastHeardMillis,
                                                 partialFrameSince: partialFrameSince)
            if case .sendAndClose(.goaway(let goaway), _) = action, goaway.status == .timeout {
                if admission.isPending(ObjectIdentifier(peer.connection)) {
                    refused(.handshakeTimeout, peerHost: peer.peerHost)
                } else if let since = partialFrameSince, now - since >= limits.timeouts.frameMs {
                    refused(.frameTimeout, peerHost: peer.peerHost)
                }
            }
            perform(action, on: peer)
            if peer.session.state != nil, peer.connection.acceptsWrites { handler.swept(peer, nowMs: now) }
        }
        for (reason, count) in admission.dueLogLines(now: now) { logRefusals(reason, count: count, peerHost: nil) }
        if let count = helloRefusalLog.due(nowMs: now) {
            logger.info("hello refused", metadata: ["count": "\(count)", "total": "\(helloRefusalCounts.values.reduce(0, +))"])
        }
        if let since = drainingSince, now - since > drainTimeoutMs {
            logger.warning("drain timed out", metadata: ["open": "\(peers.count)"])
            for peer in peers.values { peer.connection.close() }
            finishDrainIfDone()
        }
    }

    /// Graceful stop ([5.5-1]): stop accepting, GOAWAY SHUTTING_DOWN to every peer, let
    /// the service answer what it accepted, then close and call `drained` on the loop.
    /// Every caller's `drained` runs, at once if the drain is already over.
    public func drain(then drained: @escaping () -> Void) {
        guard !isDrained else { return drained() }
        whenDrained.append(drained)
        guard drainingSince == nil else { return }
        drainingSince = Clocks.monotonicMilliseconds()
        listener?.close()
        for peer in peers.values {
            perform(peer.session.beginDrain(reason: "\(limits.name) shutting down"), on: peer)
            peer.connection.pauseReading()
        }
        finishDrainIfDone()
    }

    /// The service calls this when work not tied to one connection has finished during a drain.
    public func finishDrainIfDone() {
        guard drainingSince != nil else { return }
        let servicePending = handler.hasPendingWork
        for peer in peers.values where peer.session.isDrained || !servicePending && peer.session.inflight == 0 {
            closeDrained(peer)
        }
        guard peers.isEmpty, !servicePending, !isDrained else { return }
        isDrained = true
        sweepTimer?.cancel()
        let callbacks = whenDrained
        whenDrained = []
        for callback in callbacks { callback() }
    }

    private func closeDrained(_ peer: Peer) {
        if peer.connection.isOpen { peer.connection.closeAfterFlush(timeout: .seconds(2)) }
    }
}

/// One client connection of a service: its socket and its session. Kept small, since a
/// gateway holds thousands.
/// What `ServiceHost.frameObserver` is shown.
public enum FrameObservation {
    /// A whole frame: its header and a copy of its body.
    case frame(FrameHeader, [UInt8])
    /// Bytes the framer refused (bad magic, version, flags, reserved or length).
    case framingError(WireError)
    /// The connection closed, admitted or not.
    case closed(CloseReason)
}

public final class ServicePeer<Handler: ServiceHandler>: ConnectionHandler {
    /// Strong, not unowned: the host is reached for every frame, and since it has weak
    /// references (its timer's and listener's closures) every unowned access took the
    /// runtime's slow path through a side table. The cycle with `ServiceHost.peers` ends
    /// when the connection closes (or is handed off), which removes the peer there.
    public let host: ServiceHost<Handler>
    public let connection: Connection
    private var readingResumedAt: Int64 = 0
    /// Reading is paused until unread replies drain; since when (`notHeld`: it is not).
    private var heldSince = ServicePeer.notHeld
    /// Loop-confined. No dynamic exclusivity check: without it a push through the gateway
    /// pays six (two per frame read, one per reply, one per PUSH written), 388 instructions
    /// of 11.2k, 3.5 % (measured as `ServiceHost.scratch` is).
    @exclusivity(unchecked) public var session: PeerSession<Handler.PeerState>
    /// Set while the host writes a frame it starts itself, not a reply. Last: it fits in
    /// the session's tail padding (a gateway holds one peer per device).
    var writingOwnFrame = false

    private static var notHeld: Int64 { .min }

    private var readingHeldSince: Int64? {
        get { heldSince == ServicePeer.notHeld ? nil : heldSince }
        set { heldSince = newValue ?? ServicePeer.notHeld }
    }

    init(host: ServiceHost<Handler>, connection: Connection, session: PeerSession<Handler.PeerState>) {
        self.host = host
        self.connection = connection
        self.session = session
    }

    /// The service's state for this peer; nil until admitted.
    public var state: Handler.PeerState? { session.state }
    public var role: PeerRole? { session.role }
    public var peerHost: String { connection.peerAddress?.host ?? "?" }

    public func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) {
        if let observer = host.frameObserver, !observer(self, .frame(header, Array(body))) { return }
        host.perform(session.received(header, body: body), on: self)
    }

    public func onFramingError(_ connection: Connection, error: WireError) {
        if let observer = host.frameObserver { _ = observer(self, .framingError(error)) }
        host.perform(session.framingError(error), on: self)
    }

    /// Replies the peer has not read yet: it asked for them within the limits it was
    /// granted, so stop reading its requests until they drain rather than cut it off.
    /// Output the server starts on its own (a push) is what makes a slow consumer.
    public func onBackpressure(_ connection: Connection) -> BackpressureAction {
        if writingOwnFrame { return .close }
        if readingHeldSince == nil {
            readingHeldSince = Clocks.monotonicMilliseconds()
            connection.pauseReading()
        }
        return .keepOpen
    }

    /// Whether reading is paused until the peer reads its replies.
    public var isHoldingReads: Bool { readingHeldSince != nil }

    public func onOutputDrained(_ connection: Connection) {
        guard readingHeldSince != nil else { return }
        readingHeldSince = nil
        readingResumedAt = Clocks.monotonicMilliseconds()
        // A drain keeps reading paused for good.
        if session.phase == .open || session.phase == .admitting { connection.resumeReading() }
    }

    /// When the peer was last heard from, for the silence deadline: a peer is not silent
    /// while the server is the one not reading.
    var lastHeardMillis: Int64 {
        max(connection.lastReadMillis, readingHeldSince ?? readingResumedAt)
    }

    /// The start of an unfinished frame, for the frame deadline, not counting time spent
    /// with reading held back.
    var partialFrameSinceMillis: Int64? {
        guard readingHeldSince == nil, let since = connection.partialFrameSinceMillis else { return nil }
        return max(since, readingResumedAt)
    }

    public func onClose(_ connection: Connection, reason: CloseReason) {
        if let observer = host.frameObserver { _ = observer(self, .closed(reason)) }
        host.closed(self, reason: reason)
    }
}
