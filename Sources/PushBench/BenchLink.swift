import PushClock
import PushEventLoop
import PushSession
import PushWire

/// Who receives a link's frames once its handshake is done: a scenario's workload.
protocol LinkOwner: AnyObject {
    /// A frame after HELLO_OK other than PING (answered by the link) and GOAWAY.
    func frame(on link: BenchLink, header: FrameHeader, body: UnsafeRawBufferPointer)
    /// The link closed or failed without the bench asking it to.
    func linkLost(_ link: BenchLink)
}

/// Owns no link: what a link reports to once its run is over.
final class DetachedOwner: LinkOwner, Sendable {
    static let shared = DetachedOwner()
    func frame(on link: BenchLink, header: FrameHeader, body: UnsafeRawBufferPointer) {}
    func linkLost(_ link: BenchLink) {}
}

/// One client connection of the bench, in any role: a driver of a client `PeerSession`
/// (HELLO first, PONG for every PING, GOAWAY) that hands the owner's frames over
/// without decoding them. One final class for all roles keeps the per-frame path free
/// of dynamic dispatch beyond the owner call. It arms no timer: a bench link is never
/// idle long enough to owe a PING, and the server's PINGs are answered.
final class BenchLink: ConnectionHandler {
    enum State { case idle, connecting, handshaking, ready, closed }

    /// The link's position in its group: workloads index their per-link tables with it.
    let index: Int
    /// The device id for device links (registration or fetch token), else empty.
    let device: String
    /// A device's link (as opposed to a provider's): owners with both kinds branch on it.
    let isDevice: Bool
    private(set) var state = State.idle
    private(set) var connection: Connection?
    /// Frames after the handshake go here; `detach()` resets it to `DetachedOwner`.
    var owner: LinkOwner
    /// Called once when the handshake succeeds or the link fails before it (setup only).
    weak var setup: Connector?
    /// The server's max_inflight from HELLO_OK.
    private(set) var serverMaxInflight = 1
    /// Requests this link may have outstanding: the smaller of the bench's wish and the server's limit.
    var capacity = 1
    /// Requests outstanding, kept by the owner.
    var outstanding = 0
    /// Connect start to HELLO_OK, in nanoseconds.
    private(set) var handshakeNanos: UInt64 = 0
    /// Why the link failed or closed, for the report.
    private(set) var failure: String?

    private let hello: Hello
    /// No dynamic exclusivity check (loop-confined): without it every frame pays one, 156
    /// instructions of the bench's 3.6k a push, 4.3 % (callgrind on `bench push --devices
    /// 1000`, its measured phase, 52,000 minus 2,000 pushes, release build).
    @exclusivity(unchecked) private var session = PeerSession<Void>(side: .client(SessionTimeouts()), now: 0)
    private var openedAt: UInt64 = 0
    private var closingOnPurpose = false
    private var isTLS = false
    /// The connection while it is being opened (TCP connect and, for TLS, the handshake).
    private var opening: Connection?
    private var reply: [UInt8] = []

    init(index: Int, device: String = "", hello: Hello, owner: LinkOwner) {
        self.index = index
        self.device = device
        self.isDevice = hello.role == .device
        self.hello = hello
        self.owner = owner
    }

    var isReady: Bool { state == .ready }
    var hasRoom: Bool { state == .ready && outstanding < capacity }

    func open(loop: EventLoop, to endpoint: HostPort, source: String?, tls: TLSContext?, serverName: String?) {
        guard state == .idle else { return }
        state = .connecting
        openedAt = Clocks.monotonicNanoseconds()
        isTLS = tls != nil
        opening = Connection.connect(loop: loop, host: endpoint.host, port: endpoint.port, tls: tls, serverName: serverName,
                                     sourceAddress: source) { [self] result in
            opening = nil
            switch result {
            case .success(let connection):
                self.connection = connection
                connection.handler = self
                state = .handshaking
                session = PeerSession(side: .client(SessionTimeouts()), now: Clocks.monotonicMilliseconds())
                perform(session.start(hello, correlation: 1), on: connection)
            case .failure(let error):
                state = .closed
                failure = failure ?? "connect: \(error)"
                setup?.linkFailed(self)
            }
        }
    }

    /// Time since `open`, for the connector's deadline.
    var secondsSinceOpen: Double { Double(Clocks.monotonicNanoseconds() - openedAt) / 1e9 }

    /// Ends a connect or handshake that is taking too long, as a failure of the link. A
    /// plain HELLO to a TLS server is the usual cause: OpenSSL reads its first bytes as
    /// the start of a long record and waits for the rest.
    func abandonSetup(after seconds: Double) {
        switch state {
        case .connecting:
            failure = "no connection within \(Int(seconds)) s"
            opening?.close()  // reports .cancelled, then linkFailed, through the connect callback
        case .handshaking:
            failure = "no answer to HELLO within \(Int(seconds)) s" + (isTLS ? "" : " (a TLS server? pass --ca-file)")
            closingOnPurpose = true
            connection?.close()
            connection = nil
            state = .closed
            setup?.linkFailed(self)
        case .idle, .ready, .closed:
            break
        }
    }

    /// Closes without reporting to the owner (the end of a run). Idempotent.
    func close() {
        closingOnPurpose = true
        opening?.close()
        opening = nil
        connection?.close()
        connection = nil
        state = .closed
    }

    /// Closes and forgets the owner and setup, breaking the owner <-> link cycle.
    func detach() {
        close()
        owner = DetachedOwner.shared
        setup = nil
    }

    // MARK: writing small replies

    /// A device's answer to a PUSH: DELIVERY_ACK, then the id for the scenario to look up;
    /// nil (and nothing sent) when the PUSH carries no id.
    func acknowledgePush(header: FrameHeader, body: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard let id = FieldScan.value(of: FieldTag.id.rawValue, in: body) else { return nil }
        sendDeliveryAck(correlation: header.correlation, id: id)
        return id
    }

    /// DELIVERY_ACK for a PUSH received by a device ([4.14-2]): same correlation, same id.
    /// Built on the stack and written from there (see `DeliveryAckFrame`).
    func sendDeliveryAck(correlation: UInt32, id: UnsafeRawBufferPointer) {
        guard let connection else { return }
        DeliveryAckFrame.withFrame(correlation: correlation, id: id) { connection.write($0) }
    }

    // MARK: ConnectionHandler

    func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) {
        if session.isOwnersFrame(header) {
            owner.frame(on: self, header: header, body: body)
        } else {
            perform(session.received(header, body: body), on: connection)
        }
    }

    func onFramingError(_ connection: Connection, error: WireError) {
        perform(session.framingError(error), on: connection)
    }

    private func perform(_ action: SessionAction, on connection: Connection) {
        switch action {
        case .none, .serve, .checkCredential, .malformedReply:
            break
        case .send(let message, let correlation):
            reply.removeAll(keepingCapacity: true)
            message.encode(correlation: correlation, into: &reply)
            connection.write(reply)
        case .sendAndClose(let message, let correlation):
            failure = failure ?? "\(message.type) sent to the server"
            reply.removeAll(keepingCapacity: true)
            message.encode(correlation: correlation, into: &reply)
            connection.write(reply)
            connection.closeAfterFlush(timeout: .seconds(1))
        case .close:
            connection.close()
        case .ready(let accepted):
            serverMaxInflight = Int(accepted.maxInflight)
            capacity = min(capacity, serverMaxInflight)
            connection.maxFrame = Int(accepted.maxFrame)
            handshakeNanos = Clocks.monotonicNanoseconds() - openedAt
            state = .ready
            setup?.linkReady(self)
        case .refused(let status, let text):
            failure = text == TLSContext.plainClientNotice ? "the server speaks TLS: pass --ca-file" : "HELLO refused: \(status.name)"
            connection.close()
        case .goaway(let goaway, _):
            failure = "GOAWAY \(goaway.status.name)"
            connection.close()
        case .deliver:
            break  // owners' frames never reach the session (isOwnersFrame)
        }
    }

    /// A plain HELLO to a TLS server gets a TLS alert (not a frame) or a bare close.
    private static func mayBeTLSServer(_ reason: CloseReason) -> Bool {
        switch reason {
        case .peerClosed, .framingError: true
        default: false
        }
    }

    func onClose(_ connection: Connection, reason: CloseReason) {
        let wasReady = state == .ready
        state = .closed
        self.connection = nil
        guard !closingOnPurpose else { return }
        if failure == nil { failure = "\(reason)" }
        if !wasReady, !isTLS, Self.mayBeTLSServer(reason) {
            failure = (failure ?? "") + " before HELLO_OK (a TLS server? pass --ca-file)"
        }
        if wasReady {
            owner.linkLost(self)
        } else {
            setup?.linkFailed(self)
        }
    }
}
