import CLibevent
import Glibc
import PushClock
import PushWire

/// A framed stream over a transport (plain TCP or TLS, see `Transport`). Loop-confined.
///
/// Input is cut into frames by PushWire's `FrameDecoder`, in place: a frame is handed to
/// the handler as a pointer into the bytes just read, so reading costs no copy (unless a
/// frame straddles two reads) and no allocation (see ConnectionReading). Output is
/// queued on the transport and written once per loop iteration (see ConnectionWriting).
///
/// While open, the C side holds one retain on the connection (taken when it opens,
/// given back by `close()`), so an owner may keep only the handler relationship.
public final class Connection: LoopResource {
    public let loop: EventLoop
    let transport: any Transport
    // Loop-confined state touched for every frame: dynamic exclusivity checks would cost
    // a thread-local lookup per access and can never fire, since nothing here is
    // accessed across threads or held across a call.
    //
    // A gateway holds one connection per device, so the stored fields are kept compact
    // (32-bit limits, a sentinel instead of an optional, the small fields together):
    // the object stays within a 160-byte heap chunk, list links included.
    /// Receives frames and lifecycle events; released after `onClose`.
    @exclusivity(unchecked) public var handler: (any ConnectionHandler)?
    /// `Clocks.monotonicMilliseconds()` at the last read (or at open): what a
    /// keepalive sweep compares against.
    @exclusivity(unchecked) public internal(set) var lastReadMillis: Int64
    @exclusivity(unchecked) private var partialFrameSince = Connection.noPartialFrame
    @exclusivity(unchecked) private var maxFrameLimit = UInt32(FrameLimits.defaultMaxFrame)
    @exclusivity(unchecked) private var maxOutputLimit = UInt32(Connection.defaultMaxOutputBytes)
    /// Cuts the input into frames; holds only bytes not yet delivered.
    @exclusivity(unchecked) var decoder = FrameDecoder()
    /// False: no framing; each read goes to the handler's `onBytes` as it arrived. Set it
    /// before reading starts (in `onAccept` or `onConnected`).
    @exclusivity(unchecked) public var isFramed = true
    @exclusivity(unchecked) var phase: Phase
    @exclusivity(unchecked) var flags: Flags = []
    /// The loop's list of open connections (see `EventLoop.linkConnection`).
    @exclusivity(unchecked) unowned(unsafe) var previousOnLoop: Connection?
    @exclusivity(unchecked) unowned(unsafe) var nextOnLoop: Connection?

    private static let noPartialFrame = Int64.min

    /// Frames whose total size (header + body) exceeds this are a framing error.
    /// Changing it takes effect from the next header (e.g. after HELLO).
    public var maxFrame: Int {
        get { Int(maxFrameLimit) }
        set { maxFrameLimit = UInt32(clamping: newValue) }
    }

    /// The cap on queued output; see `ConnectionHandler.onBackpressure`. At most 4 GiB.
    public var maxOutputBytes: Int {
        get { Int(maxOutputLimit) }
        set { maxOutputLimit = UInt32(clamping: newValue) }
    }

    /// `Clocks.monotonicMilliseconds()` when the input began holding an incomplete
    /// frame; nil while none is buffered. What a deadline on a started frame compares
    /// against (a peer that sends a frame byte by byte, never finishing it).
    public internal(set) var partialFrameSinceMillis: Int64? {
        get { partialFrameSince == Connection.noPartialFrame ? nil : partialFrameSince }
        set { partialFrameSince = newValue ?? Connection.noPartialFrame }
    }

    /// What only a connecting or closing connection needs; nil otherwise.
    private var steps: PendingSteps?

    /// Kept out of line: a server holds thousands of open connections that need none of
    /// it, and inline it would cost each of them about 60 bytes.
    private final class PendingSteps {
        /// Only while connecting.
        var connect: ((Result<Connection, ConnectError>) -> Void)?
        /// Only while closing after a flush.
        var closeReason: CloseReason?
        var closeTimeout: Duration?
        /// Only while handing off (see ConnectionHandoff.swift).
        var handoff: PendingHandoff?
    }

    private var pendingConnect: ((Result<Connection, ConnectError>) -> Void)? {
        get { steps?.connect }
        set { pendingSteps(creating: newValue != nil)?.connect = newValue }
    }

    var pendingCloseReason: CloseReason? {
        get { steps?.closeReason }
        set { pendingSteps(creating: newValue != nil)?.closeReason = newValue }
    }

    var closeTimeout: Duration? {
        get { steps?.closeTimeout }
        set { pendingSteps(creating: newValue != nil)?.closeTimeout = newValue }
    }

    var pendingHandoff: PendingHandoff? {
        get { steps?.handoff }
        set { pendingSteps(creating: newValue != nil)?.handoff = newValue }
    }

    private func pendingSteps(creating: Bool) -> PendingSteps? {
        if steps == nil, creating { steps = PendingSteps() }
        return steps
    }

    public static let defaultMaxOutputBytes = 256 * 1024

    /// Where the connection is in its life; each step only goes forward.
    enum Phase: UInt8 {
        /// A client's connect (and TLS handshake) is under way; writes are queued.
        case connecting
        /// Accepted or connected: the owner is installing its handler. Writes are
        /// queued, nothing is read yet.
        case starting
        case open
        /// `handOff` was called: nothing is read or delivered and writes are refused until
        /// the connection detaches from the loop on a later pass (see ConnectionHandoff).
        case handingOff
        /// Reading has stopped and writes are refused; closes once output is flushed.
        case closingAfterFlush
        case closed
    }

    struct Flags: OptionSet {
        let rawValue: UInt8
        /// By the owner, until resumeReading().
        static let readPaused = Flags(rawValue: 1 << 0)
        /// For good, after a framing error: the stream can no longer be trusted.
        static let readStopped = Flags(rawValue: 1 << 1)
        /// Output went over the cap and the owner kept the connection: waiting for it
        /// to fall to half the cap.
        static let overCap = Flags(rawValue: 1 << 2)
    }

    init(loop: EventLoop, transport: any Transport, connecting: Bool) {
        self.loop = loop
        self.transport = transport
        self.lastReadMillis = Clocks.monotonicMilliseconds()
        self.phase = connecting ? .connecting : .starting
        loop.handle.connectionObjects.add(1, ordering: .relaxed)
        loop.linkConnection(self)
        // The retain the C callbacks live on; close() gives it back.
        _ = Unmanaged.passRetained(self)
        transport.owner = self
    }

    deinit {
        loop.handle.connectionObjects.subtract(1, ordering: .relaxed)
    }

    // MARK: - State

    public var isOpen: Bool { phase != .closed }
    /// Whether `write` queues bytes now: not closing, handing off or closed.
    public var acceptsWrites: Bool { phase.rawValue <= Phase.open.rawValue }
    public var isConnecting: Bool { phase == .connecting }
    public var isTLS: Bool { transport.isTLS }

    /// The remote address; nil once closed (copy it in `onAccept` if needed later).
    public var peerAddress: SocketAddress? {
        guard phase != .closed else { return nil }
        return SocketAddress.peer(of: transport.fd)
    }

    public var localAddress: SocketAddress? {
        guard phase != .closed else { return nil }
        return SocketAddress.local(of: transport.fd)
    }

    /// Bytes queued for the peer and not yet handed to the kernel (or to OpenSSL).
    public var outputBufferedBytes: Int {
        phase == .closed ? 0 : transport.outputBufferedBytes
    }

    /// Bytes read from the peer and not yet consumed as frames.
    public var inputBufferedBytes: Int {
        phase == .closed ? 0 : decoder.bufferedByteCount + transport.inputBufferedBytes
    }

    // MARK: - Closing

    /// Closes the socket now, dropping queued output. Idempotent.
    public func close() { close(reason: .local) }

    /// Closes with the reason the handler's `onClose` will see. Idempotent.
    public func close(reason: CloseReason) {
        finish(reason: reason, connectError: .cancelled)
    }

    private func finish(reason: CloseReason, connectError: ConnectError) {
        guard phase != .closed else { return }
        phase = .closed
        let clean: Bool = switch reason {
        case .error, .tlsError: false  // the session is already broken
        default: true
        }
        transport.close(clean: clean)
        loop.unlinkConnection(self)
        let connectCallback = pendingConnect
        let handoffCallback = pendingHandoff?.completion
        steps = nil
        let handler = self.handler
        self.handler = nil
        // The caller (or the C callback trampoline) still holds a reference, so self
        // survives until these calls return.
        connectCallback?(.failure(connectError))
        handler?.onClose(self, reason: reason)
        handoffCallback?(nil)
        Unmanaged.passUnretained(self).release()
    }

    func closeForShutdown() { finish(reason: .loopShutdown, connectError: .cancelled) }

    // MARK: - Reports from the transport

    /// EOF from the peer. It may only have shut down its sending side: let our replies
    /// reach it before closing.
    func inputEnded() {
        if phase == .closingAfterFlush {
            close(reason: pendingCloseReason ?? .peerClosed)
        } else {
            closeAfterFlush(reason: .peerClosed)
        }
    }

    func transportFailed(_ reason: CloseReason) {
        // When we were closing anyway, the reason we were closing for is the useful one.
        close(reason: phase == .closingAfterFlush ? pendingCloseReason ?? reason : reason)
    }

    func flushTimedOut() { close(reason: .flushTimeout) }

    // MARK: - Connecting

    func awaitConnect(_ callback: @escaping (Result<Connection, ConnectError>) -> Void) {
        pendingConnect = callback
    }

    /// The connect could not even start; the caller reports the failure itself.
    func abandonConnect() {
        pendingConnect = nil
        finish(reason: .local, connectError: .cancelled)
    }

    func transportConnected() {
        guard phase == .connecting else { return }
        phase = .starting
        let callback = pendingConnect
        steps = nil  // nothing but the callback is pending while connecting
        callback?(.success(self))
        startIO()
    }

    func connectFailed(_ error: ConnectError) {
        let reason: CloseReason = switch error {
        case .tls(let message), .notTLS(let message): .tlsError(message)
        case .system(let errno): .error(errno: errno)
        case .refused: .error(errno: ECONNREFUSED)
        default: .peerClosed
        }
        finish(reason: reason, connectError: error)
    }
}
