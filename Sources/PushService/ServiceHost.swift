import Logging
import PushEventLoop
import PushWire

/// What a service (store, gateway) adds to the shared connection lifecycle.
public protocol ServiceHandler: AnyObject {
    /// HELLO passed version and limit checks: check the credential. Return nil to admit
    /// the peer (the host then sends HELLO_OK) or the status to refuse it with.
    func admit(_ hello: Hello, peer: ServicePeer) -> (Status, String)?
    /// Called right after HELLO_OK has been queued.
    func admitted(_ peer: ServicePeer)
    /// A request after the handshake; PING, PONG, ERROR, GOAWAY and HELLO are the host's.
    func serve(_ message: Message, correlation: UInt32, peer: ServicePeer)
    /// A reply or one-way message from the peer (a DELIVERY_ACK); never answered ([5.6-3]).
    func received(_ reply: Message, correlation: UInt32, peer: ServicePeer)
    func closed(_ peer: ServicePeer, reason: CloseReason)
    /// True while accepted requests still await completion; a drain waits for them.
    var hasPendingWork: Bool { get }
}

extension ServiceHandler {
    public func received(_ reply: Message, correlation: UInt32, peer: ServicePeer) {}
}

/// The connection lifecycle every securepush server shares (SPEC.md section 5): HELLO
/// first, negotiation, keepalive, framing faults, request errors and graceful drain.
/// Loop-confined.
public final class ServiceHost {
    public let loop: EventLoop
    public let limits: ServiceLimits
    public let logger: Logger
    // Loop-confined, like `Connection`: the hot state is read for every frame, and a
    // dynamic exclusivity check (a thread-local lookup per access) can never fire, since
    // nothing here is touched off the loop or held across a call back into the host.
    @exclusivity(unchecked) public unowned(unsafe) var handler: ServiceHandler?
    private var listener: Listener?
    @exclusivity(unchecked) private var peers: [ObjectIdentifier: ServicePeer] = [:]
    private var keepaliveTimer: LoopTimer?
    @exclusivity(unchecked) private var drainingSince: Int64?
    private var onDrained: (() -> Void)?
    /// One encode buffer for the whole loop: replies are written before the next encode.
    @exclusivity(unchecked) private var scratch: [UInt8] = []

    public var port: Int? { listener?.port }
    public var connectionCount: Int { peers.count }
    public var isDraining: Bool { drainingSince != nil }
    /// Outbound bytes allowed to queue per connection before it is cut off ([5.5-4]).
    public var maxOutputBytes = Connection.defaultMaxOutputBytes

    public init(loop: EventLoop, limits: ServiceLimits, logger: Logger) {
        self.loop = loop
        self.limits = limits
        self.logger = logger
    }

    public func listen(host: String, port: Int, tls: TLSContext?) throws(EventLoopError) {
        listener = try Listener(loop: loop, host: host, port: port, tls: tls) { [unowned self] connection in
            self.accept(connection)
        }
        let tick = Duration.milliseconds(max(100, min(1_000, Int64(limits.keepaliveMs) / 4)))
        keepaliveTimer = loop.schedule(after: tick, repeating: true) { [unowned self] in self.checkKeepalive() }
    }

    private func accept(_ connection: Connection) {
        let peer = ServicePeer(host: self, connection: connection)
        peer.overConnectionLimit = peers.count >= limits.maxConnections
        connection.maxOutputBytes = maxOutputBytes
        connection.handler = peer
        peers[ObjectIdentifier(peer)] = peer
    }

    // MARK: writing

    /// Encodes and queues one message; false if the connection is closed or was cut off.
    @discardableResult
    public func send(_ message: Message, correlation: UInt32, to peer: ServicePeer) -> Bool {
        scratch.removeAll(keepingCapacity: true)
        message.encode(correlation: correlation, into: &scratch)
        let written = peer.connection.write(scratch)
        peer.lastWriteMillis = EventLoop.monotonicMilliseconds()
        if scratch.capacity > 256 * 1024 { scratch = [] }
        return written
    }

    /// Queues an already encoded frame (a fan-out writes the same bytes to many peers).
    @discardableResult
    public func sendEncoded(_ frame: [UInt8], to peer: ServicePeer) -> Bool {
        peer.lastWriteMillis = EventLoop.monotonicMilliseconds()
        return peer.connection.write(frame)
    }

    /// GOAWAY with a fatal status, then close once it is flushed ([5.6-1]).
    public func goaway(_ peer: ServicePeer, _ status: Status, _ text: String) {
        send(.goaway(Goaway(status: status, lastCorrelation: peer.lastRequest, message: text)), correlation: 0, to: peer)
        peer.connection.closeAfterFlush(timeout: .seconds(2))
    }

    // MARK: reading

    fileprivate func frame(_ peer: ServicePeer, header: FrameHeader, body: UnsafeRawBufferPointer) {
        let message: Message
        do {
            message = try Message.decode(header: header, body: body)
        } catch {
            refuseUndecodable(peer, header: header, error: error)
            return
        }
        if message.type.isRequest { peer.lastRequest = max(peer.lastRequest, header.correlation) }
        guard peer.role != nil else {
            guard case .hello(let hello) = message else {
                goaway(peer, .helloRequired, "the first frame must be HELLO")
                return
            }
            handshake(hello, correlation: header.correlation, peer: peer)
            return
        }
        switch message {
        case .hello:
            send(.error(ErrorReply(status: .badRequest, message: "HELLO was already accepted")), correlation: header.correlation, to: peer)
        case .ping:
            send(.pong, correlation: header.correlation, to: peer)
        case .pong, .error:
            break
        case .goaway:
            peer.connection.close()
        default:
            guard message.type.isRequest else {
                handler?.received(message, correlation: header.correlation, peer: peer)
                return
            }
            // After GOAWAY SHUTTING_DOWN nothing new is taken on ([5.5-1]).
            guard drainingSince == nil else { return }
            handler?.serve(message, correlation: header.correlation, peer: peer)
        }
    }

    private func handshake(_ hello: Hello, correlation: UInt32, peer: ServicePeer) {
        switch HelloNegotiation.negotiate(hello, limits: limits, overConnectionLimit: peer.overConnectionLimit) {
        case .fatal(let status, let text):
            goaway(peer, status, text)
        case .refuse(let status, let text):
            refuseHello(peer, status, text, correlation: correlation)
        case .accept(let accepted):
            if let (status, text) = handler?.admit(hello, peer: peer) {
                refuseHello(peer, status, text, correlation: correlation)
                return
            }
            peer.role = hello.role
            peer.maxInflight = accepted.maxInflight
            peer.keepaliveMs = Int64(accepted.keepaliveMs)
            send(.helloOK(accepted), correlation: correlation, to: peer)
            peer.connection.maxFrame = Int(accepted.maxFrame)
            handler?.admitted(peer)
        }
    }

    /// ERROR, then close: a failed handshake never leaves a connection open ([5.1-3]).
    private func refuseHello(_ peer: ServicePeer, _ status: Status, _ text: String, correlation: UInt32) {
        send(.error(ErrorReply(status: status, message: text)), correlation: correlation, to: peer)
        peer.connection.closeAfterFlush(timeout: .seconds(2))
    }

    private func refuseUndecodable(_ peer: ServicePeer, header: FrameHeader, error: WireError) {
        guard peer.role != nil else {
            // Before the handshake only a well-formed HELLO is acceptable ([5.1-2], [5.1-3]).
            if header.type == .hello {
                refuseHello(peer, error.status, error.description, correlation: header.correlation)
            } else {
                goaway(peer, .helloRequired, "the first frame must be HELLO")
            }
            return
        }
        // Never ERROR about a reply or a one-way message; a GOAWAY ends the connection
        // even when malformed ([5.6-3]).
        if let type = header.type, !type.isRequest {
            if type == .goaway { peer.connection.close() }
            return
        }
        send(.error(ErrorReply(status: error.status, message: error.description)), correlation: header.correlation, to: peer)
    }

    fileprivate func closed(_ peer: ServicePeer, reason: CloseReason) {
        peers[ObjectIdentifier(peer)] = nil
        if peer.role != nil { handler?.closed(peer, reason: reason) }
        if drainingSince != nil { finishDrainIfDone() }
    }

    // MARK: keepalive and drain

    private func checkKeepalive() {
        let now = EventLoop.monotonicMilliseconds()
        for peer in peers.values {
            // Before HELLO_OK the default keepalive applies ([5.4-3]).
            let keepalive = peer.role == nil ? 30_000 : peer.keepaliveMs
            guard keepalive > 0 else { continue }
            if now - peer.connection.lastReadMillis > keepalive * 3 / 2 {
                goaway(peer, .timeout, "no bytes for 1.5 x keepalive")
            } else if peer.role != nil, now - peer.lastWriteMillis > keepalive {
                send(.ping, correlation: peer.nextPingCorrelation(), to: peer)
            }
        }
        if let since = drainingSince, now - since > 10_000 {
            logger.warning("drain timed out", metadata: ["open": "\(peers.count)"])
            for peer in peers.values { peer.connection.close() }
            finishDrainIfDone()
        }
    }

    /// Graceful stop ([5.5-1]): stop accepting, GOAWAY SHUTTING_DOWN to every peer, let
    /// the handler finish what it accepted, then close and call `drained`.
    public func drain(then drained: @escaping () -> Void) {
        guard drainingSince == nil else { return }
        drainingSince = EventLoop.monotonicMilliseconds()
        onDrained = drained
        listener?.close()
        for peer in peers.values {
            send(.goaway(Goaway(status: .shuttingDown, lastCorrelation: peer.lastRequest, message: "\(limits.name) shutting down")),
                 correlation: 0, to: peer)
            peer.connection.pauseReading()
        }
        finishDrainIfDone()
    }

    /// The handler calls this when its pending work has finished during a drain.
    public func finishDrainIfDone() {
        guard drainingSince != nil, handler?.hasPendingWork != true else { return }
        for peer in peers.values where peer.connection.isOpen {
            peer.connection.closeAfterFlush(timeout: .seconds(2))
        }
        guard peers.isEmpty, let drained = onDrained else { return }
        onDrained = nil
        keepaliveTimer?.cancel()
        drained()
    }
}

/// One client connection of a service. Kept small: a gateway holds thousands.
public final class ServicePeer: ConnectionHandler {
    unowned let host: ServiceHost
    public let connection: Connection
    // Loop-confined and read or written for every frame: unchecked for the same reason
    // as `ServiceHost`'s state (work finished off the loop comes back through the loop).
    // Services in other modules read `role` and `context` through accessors, because a
    // direct access from another module is checked whatever the attribute says.
    @exclusivity(unchecked) private var storedRole: PeerRole?
    @exclusivity(unchecked) private var storedContext: AnyObject?
    /// Nil until HELLO_OK.
    public fileprivate(set) var role: PeerRole? {
        get { storedRole }
        set { storedRole = newValue }
    }
    @exclusivity(unchecked) public fileprivate(set) var maxInflight: UInt32 = 1
    /// The service's state for this peer (a store session, a gateway device record).
    public var context: AnyObject? {
        get { storedContext }
        set { storedContext = newValue }
    }
    /// Requests accepted and not yet answered, for max_inflight ([5.3-4]).
    @exclusivity(unchecked) public var pending = 0
    @exclusivity(unchecked) var keepaliveMs: Int64 = 30_000
    @exclusivity(unchecked) var lastWriteMillis = EventLoop.monotonicMilliseconds()
    /// Highest request correlation id seen, for GOAWAY's last_correlation.
    @exclusivity(unchecked) var lastRequest: UInt32 = 0
    private var pingCorrelation: UInt32 = 0
    var overConnectionLimit = false

    init(host: ServiceHost, connection: Connection) {
        self.host = host
        self.connection = connection
    }

    /// Whether another request may be accepted without passing max_inflight.
    public var hasRequestSlot: Bool { pending < Int(maxInflight) }

    public var peerHost: String { connection.peerAddress?.host ?? "?" }

    func nextPingCorrelation() -> UInt32 {
        pingCorrelation &+= 1
        return pingCorrelation
    }

    public func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) {
        host.frame(self, header: header, body: body)
    }

    public func onFramingError(_ connection: Connection, error: WireError) {
        host.goaway(self, error.status, error.description)
    }

    public func onBackpressure(_ connection: Connection) -> BackpressureAction { .close }

    public func onClose(_ connection: Connection, reason: CloseReason) {
        host.closed(self, reason: reason)
    }
}
