import PushWire

/// How long a connection may take over the steps that have a deadline. `SessionTimeouts()`
/// suits a client (it may wait longer for HELLO_OK than a server waits for HELLO); a
/// server starts from `SessionTimeouts.server`.
public struct SessionTimeouts: Sendable, Equatable {
    /// From the connection's start to HELLO_OK: a server closes a peer that has not
    /// completed HELLO by then, however it trickles bytes; a client gives up waiting for
    /// HELLO_OK. The client default is the 45 s that [5.4-3] allows a silent client.
    public var handshakeMs: Int64 {
        get { Int64(handshake) }
        set { handshake = Int32(clamping: newValue) }
    }
    /// From the first byte of a frame to its last: a frame that has started must finish.
    public var frameMs: Int64 {
        get { Int64(frame) }
        set { frame = Int32(clamping: newValue) }
    }

    // Kept as 32-bit milliseconds (up to 24 days; longer is clamped to that): a client
    // session holds these inline, and so the session of every peer a server holds is
    // 8 bytes smaller.
    private var handshake: Int32
    private var frame: Int32

    public init(handshakeMs: Int64 = 45_000, frameMs: Int64 = 30_000) {
        handshake = Int32(clamping: handshakeMs)
        frame = Int32(clamping: frameMs)
    }

    /// A server's defaults: HELLO completed within 5 s of the accept, a started frame
    /// finished within 10 s (config keys `handshake_timeout_ms`, `frame_timeout_ms`).
    public static let server = SessionTimeouts(handshakeMs: 5_000, frameMs: 10_000)
}

/// A server's side of the limits negotiated in HELLO (SPEC.md section 5.2), the requests
/// it carries out ([4.1-4]), and how many connections it holds at each stage.
///
/// What an unauthenticated peer can cost is bounded: at most `maxPendingHandshakes`
/// connections (`maxPendingPerAddress` from one source address) wait for HELLO_OK at once,
/// each for at most `timeouts.handshakeMs`, each buffering at most `maxFrameBeforeHello`
/// bytes of an incomplete frame. So the bytes buffered for unauthenticated peers in one
/// process are at most `maxPendingHandshakes * maxFrameBeforeHello` (1 MiB by default).
public struct ServiceLimits: Sendable {
    public var maxFrame: Int {
        get { storage.values.maxFrame }
        set { update { $0.maxFrame = newValue } }
    }
    public var keepaliveMs: UInt32 {
        get { storage.values.keepaliveMs }
        set { update { $0.keepaliveMs = newValue } }
    }
    public var maxInflight: UInt32 {
        get { storage.values.maxInflight }
        set { update { $0.maxInflight = newValue } }
    }
    /// Admitted peers (past HELLO_OK) at once; a HELLO beyond it is refused with BUSY.
    /// Connections still in the handshake do not count: they have caps of their own.
    public var maxConnections: Int {
        get { storage.values.maxConnections }
        set { update { $0.maxConnections = newValue } }
    }
    /// Connections accepted and not yet past HELLO_OK, at once; one more is closed at
    /// once, with no reply.
    public var maxPendingHandshakes: Int {
        get { storage.values.maxPendingHandshakes }
        set { update { $0.maxPendingHandshakes = newValue } }
    }
    /// Connections from one source address not yet past HELLO_OK, at once.
    public var maxPendingPerAddress: Int {
        get { storage.values.maxPendingPerAddress }
        set { update { $0.maxPendingPerAddress = newValue } }
    }
    public var timeouts: SessionTimeouts {
        get { storage.values.timeouts }
        set { update { $0.timeouts = newValue } }
    }
    /// The requests this service serves; any other request is BAD_REQUEST once the role
    /// check has passed.
    public var served: Set<MessageType> {
        get { storage.values.served }
        set { update { $0.served = newValue; $0.servedMask = ServiceLimits.mask(newValue) } }
    }

    /// Whether `type` is in `served`, checked for every request: a bit test instead of
    /// hashing into the set.
    public func serves(_ type: MessageType) -> Bool {
        type.rawValue < 64 ? storage.values.servedMask & (1 << UInt64(type.rawValue)) != 0 : storage.values.served.contains(type)
    }

    private static func mask(_ served: Set<MessageType>) -> UInt64 {
        served.reduce(0) { mask, type in type.rawValue < 64 ? mask | 1 << UInt64(type.rawValue) : mask }
    }
    public var name: String {
        get { storage.values.name }
        set { update { $0.name = newValue } }
    }

    /// Every server session keeps its service's limits, and a gateway holds one session
    /// per device: the values live in one copy-on-write box, so a session's copy is one
    /// reference (8 bytes) instead of about 80.
    private var storage: Storage

    private struct Values {
        var maxFrame = FrameLimits.defaultMaxFrame
        var keepaliveMs: UInt32 = 30_000
        var maxInflight: UInt32 = 4096
        var maxConnections = 10_000
        var maxPendingHandshakes = 1_024
        var maxPendingPerAddress = ServiceLimits.defaultMaxPendingPerAddress
        var timeouts = SessionTimeouts.server
        var served: Set<MessageType>
        var name: String
        /// `served` as bits by raw type, for the types below 64 (all of them today).
        var servedMask: UInt64 = 0
    }

    /// Immutable, so a read needs no exclusivity check and the box is Sendable as it is:
    /// a change (configuration only) makes a new one.
    private final class Storage: Sendable {
        let values: Values
        init(_ values: Values) { self.values = values }
    }

    private mutating func update(_ change: (inout Values) -> Void) {
        var values = storage.values
        change(&values)
        storage = Storage(values)
    }

    public init(name: String, served: Set<MessageType>) {
        storage = Storage(Values(served: served, name: name, servedMask: ServiceLimits.mask(served)))
    }

    /// A client opening many connections to one server keeps at most this many
    /// handshakes under way from one address.
    public static let defaultMaxPendingPerAddress = 64

    /// The keepalive a server applies before HELLO_OK ([5.4-3]).
    public static let handshakeKeepaliveMs: Int64 = 30_000

    /// The largest frame (header included) a server reads before HELLO_OK: enough for a
    /// HELLO; a longer header is FRAME_TOO_LARGE without its body being read.
    public static let maxFrameBeforeHello = 1_024

    /// Why these limits cannot run a service, or nil.
    public var problem: String? {
        if timeouts.handshakeMs < 1 { return "the handshake timeout must be at least 1 ms, not \(timeouts.handshakeMs)" }
        if timeouts.frameMs < 1 { return "the frame timeout must be at least 1 ms, not \(timeouts.frameMs)" }
        if maxConnections < 1 { return "the connection limit must be at least 1, not \(maxConnections)" }
        if maxPendingHandshakes < 1 { return "the pending handshake limit must be at least 1, not \(maxPendingHandshakes)" }
        if maxPendingPerAddress < 1 { return "the per-address pending handshake limit must be at least 1, not \(maxPendingPerAddress)" }
        return nil
    }

    /// The connection settings of a config file: `handshake_timeout_ms`, `frame_timeout_ms`,
    /// `max_pending_handshakes` and `max_pending_per_address`, each read as `SECTION.KEY`
    /// (`store.handshake_timeout_ms`) or, for every service at once, as the bare key; the
    /// sectioned one wins. `integer` looks a key up.
    public mutating func apply(configSection section: String, _ integer: (String) -> Int?) {
        func value(_ key: String) -> Int? { integer(section + "." + key) ?? integer(key) }
        if let ms = value("handshake_timeout_ms") { timeouts.handshakeMs = Int64(ms) }
        if let ms = value("frame_timeout_ms") { timeouts.frameMs = Int64(ms) }
        if let count = value("max_pending_handshakes") { maxPendingHandshakes = count }
        if let count = value("max_pending_per_address") { maxPendingPerAddress = count }
    }
}
