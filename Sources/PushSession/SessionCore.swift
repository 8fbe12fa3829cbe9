import PushWire

/// The rules of one protocol connection (SPEC.md section 5), for either side, as a state
/// machine with no I/O: everything of a `PeerSession` but the owner's per-peer state.
/// See `PeerSession` for how a driver uses it.
///
/// Not generic, on purpose: a method of a generic struct takes the struct's type
/// metadata, which unspecialized callers (a service host generic over its handler) look
/// up in the runtime's cache on every call, some 300 instructions, several times per
/// frame. `PeerSession` forwards to this type from inlinable code, so they pay nothing.
public struct SessionCore {
    public enum Side: Sendable {
        case server(ServiceLimits, overConnectionLimit: Bool)
        case client(SessionTimeouts)
    }

    public enum Phase: Equatable, Sendable {
        /// Server: waiting for HELLO. Client: HELLO sent, waiting for HELLO_OK.
        case handshaking
        /// Server: HELLO accepted by negotiation, the service is checking the credential.
        case admitting
        case open
        /// After GOAWAY SHUTTING_DOWN: no new requests, the owed replies still flow.
        case draining
        /// A close has been decided; nothing more is read or served.
        case closed
    }

    // A gateway keeps one session per device: the fields are ordered so that the small
    // ones share words (Swift lays a struct out in declaration order).
    public let side: Side
    public internal(set) var phase = Phase.handshaking
    /// The peer's role once known: the server learns it from HELLO, a client states it.
    public internal(set) var role: PeerRole?
    /// Server: the highest request correlation id received, for GOAWAY's last_correlation.
    public internal(set) var lastRequestCorrelation: UInt32 = 0
    /// Client: the correlation id of HELLO.
    var helloCorrelation: UInt32 = 0
    var pingCorrelation: UInt32 = 0
    /// The values agreed in HELLO_OK, once it has been sent (server) or received (client).
    public internal(set) var negotiated: HelloOK?

    let openedAt: Int64
    var lastSentAt: Int64
    /// At most max_inflight, a UInt32.
    private var inflightCount: UInt32 = 0

    /// Server: requests served and not yet answered ([5.3-4]).
    public internal(set) var inflight: Int {
        get { Int(inflightCount) }
        set { inflightCount = UInt32(newValue) }
    }

    public init(side: Side, now: Int64) {
        self.side = side
        self.openedAt = now
        self.lastSentAt = now
    }

    /// Read from `side` rather than kept: a server holds one session per peer.
    var timeouts: SessionTimeouts {
        switch side {
        case .server(let limits, _): limits.timeouts
        case .client(let timeouts): timeouts
        }
    }

    public var isServer: Bool {
        if case .server = side { return true }
        return false
    }

    /// The keepalive in force: the negotiated one after HELLO_OK, the default before ([5.4-3]).
    public var keepaliveMs: Int64 {
        negotiated.map { Int64($0.keepaliveMs) } ?? ServiceLimits.handshakeKeepaliveMs
    }

    /// A frame was written to the peer (for [5.4-1]: PING only after `keepaliveMs` of silence).
    public mutating func sent(now: Int64) {
        lastSentAt = now
    }

    /// The peer's connection closed; nothing more happens on it.
    public mutating func closed() {
        phase = .closed
    }

    // MARK: timers

    /// The driver's timer fired. `lastReceivedAt` is when bytes last arrived from the peer,
    /// `partialFrameSince` when the input began to hold an incomplete frame (nil if none).
    /// Every deadline is checked here: the handshake ([5.4-3] and `handshakeMs`), a frame
    /// that has started (`frameMs`), silence ([5.4-2]), and the PING owed ([5.4-1]).
    public mutating func timerFired(now: Int64, lastReceivedAt: Int64, partialFrameSince: Int64?) -> SessionAction {
        switch phase {
        case .closed:
            return .none
        case .handshaking, .admitting:
            if now - openedAt >= timeouts.handshakeMs {
                return fatal(.timeout, isServer ? "HELLO was not completed within \(timeouts.handshakeMs) ms"
                                                : "no HELLO_OK within \(timeouts.handshakeMs) ms")
            }
        case .open, .draining:
            break
        }
        if let since = partialFrameSince, now - since >= timeouts.frameMs {
            return fatal(.timeout, "a frame was not completed within \(timeouts.frameMs) ms")
        }
        let keepalive = keepaliveMs
        guard keepalive > 0 else { return .none }
        if now - lastReceivedAt >= keepalive * 3 / 2 {
            return fatal(.timeout, "nothing received for 1.5 x keepalive (\(keepalive * 3 / 2) ms)")
        }
        if negotiated != nil, now - lastSentAt >= keepalive {
            lastSentAt = now
            return .send(.ping, correlation: nextPingCorrelation())
        }
        return .none
    }

    /// The latest time the next `timerFired` is useful, for a driver with a timer of its own
    /// per connection (a server sweeps all of its connections instead).
    public func nextDeadline(lastReceivedAt: Int64, partialFrameSince: Int64?) -> Int64? {
        guard phase != .closed else { return nil }
        var deadlines: [Int64] = []
        if phase == .handshaking || phase == .admitting { deadlines.append(openedAt + timeouts.handshakeMs) }
        if let since = partialFrameSince { deadlines.append(since + timeouts.frameMs) }
        let keepalive = keepaliveMs
        if keepalive > 0 {
            deadlines.append(lastReceivedAt + keepalive * 3 / 2)
            if negotiated != nil { deadlines.append(lastSentAt + keepalive) }
        }
        return deadlines.min()
    }

    /// A keepalive PING's correlation id. A client's have the top bit set, so they never
    /// meet the ids of its own requests (numbered up from 1).
    mutating func nextPingCorrelation() -> UInt32 {
        pingCorrelation = pingCorrelation == 0x7FFF_FFFF ? 1 : pingCorrelation + 1
        return isServer ? pingCorrelation : pingCorrelation | 0x8000_0000
    }

    func isOwnPing(_ correlation: UInt32) -> Bool {
        !isServer && correlation & 0x8000_0000 != 0
    }

    /// GOAWAY with a fatal status and this side's last_correlation, then close ([5.6-1]).
    mutating func fatal(_ status: Status, _ text: String) -> SessionAction {
        phase = .closed
        return .sendAndClose(.goaway(Goaway(status: status, lastCorrelation: lastRequestCorrelation, message: text)), correlation: 0)
    }

    // MARK: frames

    /// A whole frame arrived. The body is decoded here, so every rule about what may
    /// arrive when is applied in one place.
    public mutating func received(_ header: FrameHeader, body: UnsafeRawBufferPointer) -> SessionAction {
        guard phase != .closed else { return .none }
        let message: Message
        do {
            message = try Message.decode(header: header, body: body)
        } catch {
            return undecodable(header, error: error)
        }
        // Handed on, not copied: a copy of a PUSH retains every array and string in it.
        if isServer { return serverReceived(message, correlation: header.correlation) }
        return clientReceived(message, correlation: header.correlation)
    }

    /// Whether a frame with this header is the owner's business alone, so a driver that
    /// reads bodies itself (a load generator) may hand it over without `received`: any
    /// frame after HELLO_OK but PING, GOAWAY, HELLO and the PONG to the session's own
    /// keepalive, which the session answers or must see.
    public func isOwnersFrame(_ header: FrameHeader) -> Bool {
        guard phase == .open else { return false }
        switch header.rawType {
        case MessageType.ping.rawValue, MessageType.goaway.rawValue, MessageType.hello.rawValue:
            return false
        case MessageType.pong.rawValue:
            return !isOwnPing(header.correlation)
        default:
            return true
        }
    }

    /// A frame whose header could not be trusted: GOAWAY with its status ([5.6-1]).
    public mutating func framingError(_ error: WireError) -> SessionAction {
        guard phase != .closed else { return .none }
        return fatal(error.status, error.description)
    }

    private mutating func undecodable(_ header: FrameHeader, error: WireError) -> SessionAction {
        let type = header.type
        if isServer, role == nil {
            // Before the handshake only a well-formed HELLO is acceptable ([5.1-2], [5.1-3]).
            guard type == .hello, phase == .handshaking else { return fatal(.helloRequired, "the first frame must be HELLO") }
            phase = .closed
            return .sendAndClose(.error(ErrorReply(status: error.status, message: error.description)), correlation: header.correlation)
        }
        if let type, !type.isRequest {
            // Never ERROR about a reply or a one-way message; a malformed GOAWAY still
            // ends the connection ([5.6-3]).
            if type == .goaway {
                phase = .closed
                return .close
            }
            if !isServer, type != .missed, phase != .handshaking {
                return .malformedReply(correlation: header.correlation, error)
            }
            return .none
        }
        // A request, or a type this side does not know: a request error ([5.6-2]).
        if isServer, type != nil { noteRequest(header.correlation) }
        return .send(.error(ErrorReply(status: error.status, message: error.description)), correlation: header.correlation)
    }
}
