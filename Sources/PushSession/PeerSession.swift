import PushWire

/// The rules of one protocol connection (SPEC.md section 5), for either side, as a state
/// machine with no I/O: a driver feeds it events — a frame arrived, the timer fired,
/// a frame was written, the service answered, a drain began — and carries out the
/// `SessionAction` each returns. Times are milliseconds on a monotonic clock the driver
/// reads, so tests drive every rule with a fake clock.
///
/// `State` is what the owner keeps per peer (a store session, a gateway device record);
/// a server's is set when the service admits the peer.
///
/// The rules themselves live in the non-generic `SessionCore`; every member here is an
/// inlinable forwarder, so a driver that is itself generic (a service host) calls them
/// without looking up this type's metadata at run time (see `SessionCore`).
public struct PeerSession<State> {
    public typealias Side = SessionCore.Side
    public typealias Phase = SessionCore.Phase

    /// First, so that it sits at offset 0 whatever `State` is.
    @usableFromInline var core: SessionCore
    /// The owner's per-peer state; a server's is set by `admit`.
    public var state: State?

    public init(side: Side, now: Int64, state: State? = nil) {
        core = SessionCore(side: side, now: now)
        self.state = state
    }

    @inlinable @inline(__always) public var side: Side { core.side }
    @inlinable @inline(__always) public var phase: Phase { core.phase }
    /// The peer's role once known: the server learns it from HELLO, a client states it.
    @inlinable @inline(__always) public var role: PeerRole? { core.role }
    /// Server: the highest request correlation id received, for GOAWAY's last_correlation.
    @inlinable @inline(__always) public var lastRequestCorrelation: UInt32 { core.lastRequestCorrelation }
    /// The values agreed in HELLO_OK, once it has been sent (server) or received (client).
    @inlinable @inline(__always) public var negotiated: HelloOK? { core.negotiated }
    /// Server: requests served and not yet answered ([5.3-4]).
    @inlinable @inline(__always) public var inflight: Int { core.inflight }
    @inlinable @inline(__always) public var isServer: Bool { core.isServer }
    /// The keepalive in force: the negotiated one after HELLO_OK, the default before ([5.4-3]).
    @inlinable @inline(__always) public var keepaliveMs: Int64 { core.keepaliveMs }
    /// Draining and every served request answered: the connection may close.
    @inlinable @inline(__always) public var isDrained: Bool { core.isDrained }
    /// Whether requests may be sent now: after HELLO_OK and before any GOAWAY ([5.1-1], [5.5-2]).
    @inlinable @inline(__always) public var acceptsRequests: Bool { core.acceptsRequests }

    // MARK: events (see `SessionCore` for each rule)

    @inlinable @inline(__always) public mutating func sent(now: Int64) { core.sent(now: now) }
    @inlinable @inline(__always) public mutating func closed() { core.closed() }

    @inlinable @inline(__always)
    public mutating func timerFired(now: Int64, lastReceivedAt: Int64, partialFrameSince: Int64?) -> SessionAction {
        core.timerFired(now: now, lastReceivedAt: lastReceivedAt, partialFrameSince: partialFrameSince)
    }

    @inlinable @inline(__always)
    public func nextDeadline(lastReceivedAt: Int64, partialFrameSince: Int64?) -> Int64? {
        core.nextDeadline(lastReceivedAt: lastReceivedAt, partialFrameSince: partialFrameSince)
    }

    @inlinable @inline(__always)
    public mutating func received(_ header: FrameHeader, body: UnsafeRawBufferPointer) -> SessionAction {
        core.received(header, body: body)
    }

    @inlinable @inline(__always) public func isOwnersFrame(_ header: FrameHeader) -> Bool { core.isOwnersFrame(header) }
    @inlinable @inline(__always) public mutating func framingError(_ error: WireError) -> SessionAction { core.framingError(error) }

    // MARK: server

    /// The service admitted the peer: HELLO_OK goes out and the negotiated values take
    /// effect ([5.2-7]).
    public mutating func admit(_ state: State) -> SessionAction {
        guard let action = core.admit() else { return .none }
        self.state = state
        return action
    }

    @inlinable @inline(__always) public mutating func refuse(_ status: Status, _ text: String) -> SessionAction { core.refuse(status, text) }
    @inlinable @inline(__always) public mutating func answered(now: Int64) { core.answered(now: now) }
    @inlinable @inline(__always) public mutating func beginDrain(reason: String) -> SessionAction { core.beginDrain(reason: reason) }
    @inlinable @inline(__always) public mutating func goaway(_ status: Status, _ text: String) -> SessionAction { core.goaway(status, text) }

    // MARK: client

    @inlinable @inline(__always) public mutating func start(_ hello: Hello, correlation: UInt32) -> SessionAction { core.start(hello, correlation: correlation) }
}
