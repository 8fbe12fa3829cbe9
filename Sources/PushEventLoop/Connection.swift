import CLibevent
import Glibc
import PushWire

/// A framed stream over a libevent bufferevent (plain TCP or OpenSSL). Loop-confined.
///
/// Input is cut into frames by PushWire's `FrameDecoder`, in place: a frame is handed to
/// the handler as a pointer into the bytes just read, so reading costs no copy (unless a
/// frame straddles two reads) and no allocation (see ConnectionReading). Output is appended to the
/// bufferevent's buffer and written once per loop iteration (see ConnectionWriting),
/// which batches many small writes into one syscall.
///
/// While open, the C side holds one retain on the connection (taken when it opens,
/// given back by `close()`), so an owner may keep only the handler relationship.
public final class Connection: LoopResource {
    public let loop: EventLoop
    // Loop-confined state touched for every frame: dynamic exclusivity checks would cost
    // a thread-local lookup per access and can never fire, since nothing here is
    // accessed across threads or held across a call.
    @exclusivity(unchecked) var bev: OpaquePointer?
    /// Receives frames and lifecycle events; released after `onClose`.
    @exclusivity(unchecked) public var handler: (any ConnectionHandler)?
    /// Frames whose total size (header + body) exceeds this are a framing error.
    /// Changing it takes effect from the next header (e.g. after HELLO).
    @exclusivity(unchecked) public var maxFrame: Int = FrameLimits.defaultMaxFrame
    /// The cap on queued output; see `ConnectionHandler.onBackpressure`.
    @exclusivity(unchecked) public var maxOutputBytes: Int = Connection.defaultMaxOutputBytes
    /// `EventLoop.monotonicMilliseconds()` at the last read callback (or at open):
    /// what a keepalive sweep compares against.
    @exclusivity(unchecked) public internal(set) var lastReadMillis: Int64
    /// `EventLoop.monotonicMilliseconds()` when the input began holding an incomplete
    /// frame; nil while none is buffered. What a deadline on a started frame compares
    /// against (a peer that sends a frame byte by byte, never finishing it).
    @exclusivity(unchecked) public internal(set) var partialFrameSinceMillis: Int64?
    /// Cuts the input into frames; holds only bytes not yet delivered.
    @exclusivity(unchecked) var decoder = FrameDecoder()
    @exclusivity(unchecked) var state: State
    /// Plain TCP: our own read event on the socket (see ConnectionReading).
    @exclusivity(unchecked) var readEvent: OpaquePointer?
    /// Queued for the loop's end-of-iteration flush.
    @exclusivity(unchecked) var flushQueued = false
    /// Only while connecting.
    private var pendingConnect: ((Result<Connection, ConnectError>) -> Void)?
    /// Only while closing after a flush.
    var pendingCloseReason: CloseReason?

    public static let defaultMaxOutputBytes = 256 * 1024

    struct State: OptionSet {
        let rawValue: UInt16
        static let closed = State(rawValue: 1 << 0)
        static let connecting = State(rawValue: 1 << 1)
        /// Permanently: after a framing error, EOF, or closeAfterFlush.
        static let readStopped = State(rawValue: 1 << 2)
        /// By the owner, until resumeReading().
        static let readPaused = State(rawValue: 1 << 3)
        static let closingAfterFlush = State(rawValue: 1 << 4)
        static let overCap = State(rawValue: 1 << 5)
        static let tls = State(rawValue: 1 << 6)
        static let readEnabled = State(rawValue: 1 << 7)
        /// Plain TCP, connected: output is written by `flushOutput` rather than by
        /// libevent's write event, which is armed only while the socket would block.
        static let directWrites = State(rawValue: 1 << 8)
    }

    init(loop: EventLoop, bev: OpaquePointer, tls: Bool, connecting: Bool) {
        self.loop = loop
        self.bev = bev
        self.lastReadMillis = EventLoop.monotonicMilliseconds()
        var state: State = []
        if tls { state.insert(.tls) }
        if connecting { state.insert(.connecting) }
        self.state = state
        loop.handle.connectionObjects.add(1, ordering: .relaxed)
        loop.register(self)
        loop.openConnectionCount += 1
        // The retain the C callbacks live on; close() gives it back.
        let context = Unmanaged.passRetained(self).toOpaque()
        bufferevent_setcb(bev, connectionReadCallback, nil, connectionEventCallback, context)
    }

    deinit {
        loop.handle.connectionObjects.subtract(1, ordering: .relaxed)
    }

    // MARK: - State

    public var isOpen: Bool { !state.contains(.closed) }
    public var isConnecting: Bool { state.contains(.connecting) }
    public var isTLS: Bool { state.contains(.tls) }

    /// The remote address; nil once closed (copy it in `onAccept` if needed later).
    public var peerAddress: SocketAddress? {
        guard let bev else { return nil }
        return SocketAddress.peer(of: bufferevent_getfd(bev))
    }

    public var localAddress: SocketAddress? {
        guard let bev else { return nil }
        return SocketAddress.local(of: bufferevent_getfd(bev))
    }

    /// Bytes queued for the peer and not yet handed to the kernel (or to OpenSSL).
    public var outputBufferedBytes: Int {
        guard let bev else { return 0 }
        return evbuffer_get_length(bufferevent_get_output(bev))
    }

    /// Bytes read from the peer and not yet consumed as frames.
    public var inputBufferedBytes: Int {
        guard let bev else { return 0 }
        return decoder.bufferedByteCount + (state.contains(.tls) ? evbuffer_get_length(bufferevent_get_input(bev)) : 0)
    }

    // MARK: - Closing

    /// Stops reading, lets queued output (a GOAWAY, say) reach the peer, then closes
    /// with `reason`. With a `timeout`, gives up (`.flushTimeout`) if the peer makes no
    /// progress reading for that long.
    public func closeAfterFlush(reason: CloseReason = .local, timeout: Duration? = nil) {
        guard let bev, !state.contains(.closingAfterFlush) else { return }
        state.insert([.readStopped, .closingAfterFlush])
        updateReading()
        guard evbuffer_get_length(bufferevent_get_output(bev)) > 0, !state.contains(.connecting) else {
            close(reason: reason)
            return
        }
        pendingCloseReason = reason
        if let timeout {
            var deadline = timeval(timeout)
            bufferevent_set_timeouts(bev, nil, &deadline)
        }
        updateWriteWatch()
    }

    /// Closes the socket now, dropping queued output. Idempotent.
    public func close() { close(reason: .local) }

    /// Closes with the reason the handler's `onClose` will see. Idempotent.
    public func close(reason: CloseReason) {
        finish(reason: reason, connectError: .cancelled)
    }

    private func finish(reason: CloseReason, connectError: ConnectError) {
        guard let bev else { return }
        self.bev = nil
        state.insert(.closed)
        if let readEvent {
            // Safe inside this event's own callback: libevent copies what it needs first.
            event_free(readEvent)
            self.readEvent = nil
        }
        if state.contains(.tls) {
            switch reason {
            case .error, .tlsError: break  // the session is already broken
            default: TLSContext.sendCloseNotify(bev)
            }
        }
        // Frees the socket too (BEV_OPT_CLOSE_ON_FREE). Safe from inside a bufferevent
        // callback: libevent defers the actual free until the callback returns.
        bufferevent_free(bev)
        loop.unregister(self)
        loop.openConnectionCount -= 1
        pendingCloseReason = nil
        let connectCallback = pendingConnect
        pendingConnect = nil
        let handler = self.handler
        self.handler = nil
        // The caller (or the C callback trampoline) still holds a reference, so self
        // survives until these calls return.
        connectCallback?(.failure(connectError))
        handler?.onClose(self, reason: reason)
        Unmanaged.passUnretained(self).release()
    }

    func closeForShutdown() { finish(reason: .loopShutdown, connectError: .cancelled) }

    // MARK: - Events

    func event(_ what: Int16) {
        let code = errno
        guard let bev else { return }
        if what & sp_BEV_EVENT_CONNECTED != 0 {
            if state.contains(.connecting) { connected() }
            return
        }
        if state.contains(.connecting) {
            connectFailed(what, errno: code, bev: bev)
            return
        }
        if what & sp_BEV_EVENT_TIMEOUT != 0 {
            close(reason: .flushTimeout)
        } else if state.contains(.closingAfterFlush) {
            // We were closing anyway; the reason we were closing for is the useful one.
            close(reason: pendingCloseReason ?? .peerClosed)
        } else if what & sp_BEV_EVENT_EOF != 0 {
            // The peer may only have shut down its sending side: let our replies reach
            // it before closing.
            closeAfterFlush(reason: .peerClosed)
        } else if what & sp_BEV_EVENT_ERROR != 0 {
            if state.contains(.tls), let message = TLSContext.errorMessage(for: bev) {
                close(reason: .tlsError(message))
            } else {
                close(reason: .error(errno: code == 0 ? EIO : code))
            }
        }
    }

    func awaitConnect(_ callback: @escaping (Result<Connection, ConnectError>) -> Void) {
        pendingConnect = callback
    }

    /// The connect could not even start; the caller reports the failure itself.
    func abandonConnect() {
        pendingConnect = nil
        finish(reason: .local, connectError: .cancelled)
    }

    private func connected() {
        state.remove(.connecting)
        if state.contains(.tls), let bev { bufferevent_openssl_set_allow_dirty_shutdown(bev, 1) }
        let callback = pendingConnect
        pendingConnect = nil
        callback?(.success(self))
        startIO()
    }

    private func connectFailed(_ what: Int16, errno code: Int32, bev: OpaquePointer) {
        // errno is only meaningful if the failing call set it; a leftover EAGAIN is not.
        let meaningful = code != 0 && code != EAGAIN && code != EINPROGRESS
        let error: ConnectError
        if code == ECONNREFUSED {
            error = .refused
        } else if state.contains(.tls), let message = TLSContext.errorMessage(for: bev) {
            error = .tls(message)
        } else if meaningful {
            error = .system(errno: code)
        } else {
            // EOF with no error: the peer hung up mid-handshake (or, for plain TCP, reset).
            error = state.contains(.tls) ? .closedDuringHandshake : .system(errno: ECONNRESET)
        }
        let reason: CloseReason = switch error {
        case .tls(let message): .tlsError(message)
        case .system(let errno): .error(errno: errno)
        case .refused: .error(errno: ECONNREFUSED)
        default: .peerClosed
        }
        finish(reason: reason, connectError: error)
    }
}

func connectionReadCallback(_ bev: OpaquePointer?, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let connection = Unmanaged<Connection>.fromOpaque(context).takeUnretainedValue()
    withExtendedLifetime(connection) { connection.readable() }
}

func connectionSocketReadCallback(_ fd: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let connection = Unmanaged<Connection>.fromOpaque(context).takeUnretainedValue()
    withExtendedLifetime(connection) { connection.socketReadable() }
}

func connectionWriteCallback(_ bev: OpaquePointer?, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let connection = Unmanaged<Connection>.fromOpaque(context).takeUnretainedValue()
    withExtendedLifetime(connection) { connection.drained() }
}

func connectionEventCallback(_ bev: OpaquePointer?, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let connection = Unmanaged<Connection>.fromOpaque(context).takeUnretainedValue()
    withExtendedLifetime(connection) { connection.event(what) }
}

/// Latency over throughput for a request/response protocol: small frames go out now.
func setNoDelay(_ fd: Int32) {
    var one: Int32 = 1
    _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
}
