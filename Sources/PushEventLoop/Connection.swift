import CLibevent
import Glibc
import PushWire
import Synchronization

/// A framed stream over a libevent bufferevent (plain TCP or OpenSSL). Loop-confined.
///
/// Input is cut into frames in place: a frame is handed to the handler as a pointer
/// into the input buffer and drained afterwards, so reading costs no copy (unless a
/// frame straddles two buffer chunks) and no allocation. Output is appended to the
/// bufferevent's buffer and flushed by libevent once per loop iteration, which is
/// what batches many small writes into one syscall.
///
/// While open, the C side holds one retain on the connection (taken when it opens,
/// given back by `close()`), so an owner may keep only the handler relationship.
public final class Connection: LoopResource {
    public let loop: EventLoop
    // Loop-confined state touched for every frame: dynamic exclusivity checks would cost
    // a thread-local lookup per access and can never fire, since nothing here is
    // accessed across threads or held across a call.
    @exclusivity(unchecked) private var bev: OpaquePointer?
    /// Receives frames and lifecycle events; released after `onClose`.
    @exclusivity(unchecked) public var handler: (any ConnectionHandler)?
    /// Frames whose total size (header + body) exceeds this are a framing error.
    /// Changing it takes effect from the next header (e.g. after HELLO).
    @exclusivity(unchecked) public var maxFrame: Int = FrameLimits.defaultMaxFrame
    /// The cap on queued output; see `ConnectionHandler.onBackpressure`.
    @exclusivity(unchecked) public var maxOutputBytes: Int = Connection.defaultMaxOutputBytes
    /// `EventLoop.monotonicMilliseconds()` at the last read callback (or at open):
    /// what a keepalive sweep compares against.
    @exclusivity(unchecked) public private(set) var lastReadMillis: Int64
    @exclusivity(unchecked) private var state: State
    /// Only while connecting.
    private var pendingConnect: ((Result<Connection, ConnectError>) -> Void)?
    /// Only while closing after a flush.
    private var pendingCloseReason: CloseReason?

    public static let defaultMaxOutputBytes = 256 * 1024

    private struct State: OptionSet {
        let rawValue: UInt8
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
    }

    private static let liveCounter = Atomic<Int>(0)

    /// Connection objects currently alive in the process (open or not yet deallocated):
    /// a leak detector for tests and a gauge for metrics.
    public static var liveInstances: Int { liveCounter.load(ordering: .relaxed) }

    init(loop: EventLoop, bev: OpaquePointer, tls: Bool, connecting: Bool) {
        self.loop = loop
        self.bev = bev
        self.lastReadMillis = EventLoop.monotonicMilliseconds()
        var state: State = []
        if tls { state.insert(.tls) }
        if connecting { state.insert(.connecting) }
        self.state = state
        Connection.liveCounter.add(1, ordering: .relaxed)
        loop.register(self)
        loop.openConnectionCount += 1
        // The retain the C callbacks live on; close() gives it back.
        let context = Unmanaged.passRetained(self).toOpaque()
        bufferevent_setcb(bev, connectionReadCallback, nil, connectionEventCallback, context)
    }

    deinit {
        Connection.liveCounter.subtract(1, ordering: .relaxed)
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
        return evbuffer_get_length(bufferevent_get_input(bev))
    }

    // MARK: - Reading

    /// Called once the owner has had the chance to install a handler.
    func startReading() {
        state.insert(.readEnabled)
        updateReading()
    }

    /// Stops delivering frames (and reading from the socket) until `resumeReading()`.
    public func pauseReading() {
        state.insert(.readPaused)
        updateReading()
    }

    public func resumeReading() {
        guard state.contains(.readPaused) else { return }
        state.remove(.readPaused)
        updateReading()
        // Whole frames may already sit in the input buffer; no new bytes will arrive
        // to announce them, so ask libevent for a (deferred, not re-entrant) read callback.
        if let bev, canDeliver, evbuffer_get_length(bufferevent_get_input(bev)) >= FrameHeader.size {
            bufferevent_trigger(bev, sp_EV_READ, Int32(BEV_TRIG_DEFER_CALLBACKS.rawValue))
        }
    }

    private var canDeliver: Bool {
        state.isDisjoint(with: [.closed, .connecting, .readStopped, .readPaused]) && state.contains(.readEnabled)
    }

    private func updateReading() {
        guard let bev else { return }
        if canDeliver {
            bufferevent_enable(bev, sp_EV_READ)
        } else {
            bufferevent_disable(bev, sp_EV_READ)
        }
    }

    fileprivate func readable() {
        lastReadMillis = EventLoop.monotonicMilliseconds()
        guard let bev, let input = bufferevent_get_input(bev) else { return }
        while canDeliver {
            // Fast path: every whole frame inside the first contiguous chunk is parsed and
            // delivered in place, then all of them are drained with a single call.
            var extent = iovec()
            guard evbuffer_peek(input, -1, nil, &extent, 1) > 0 else { return }
            let chunk = UnsafeRawBufferPointer(start: extent.iov_base, count: extent.iov_len)
            var consumed = 0
            while canDeliver, chunk.count - consumed >= FrameHeader.size {
                let header: FrameHeader
                do throws(WireError) {
                    header = try FrameHeader.parse(
                        UnsafeRawBufferPointer(rebasing: chunk[consumed ..< consumed + FrameHeader.size]),
                        maxFrame: maxFrame)
                } catch {
                    if consumed > 0 { evbuffer_drain(input, consumed) }
                    framingError(error)
                    return
                }
                let frameLength = header.frameLength
                guard chunk.count - consumed >= frameLength else { break }
                let body = UnsafeRawBufferPointer(rebasing: chunk[consumed + FrameHeader.size ..< consumed + frameLength])
                handler?.onFrame(self, header: header, body: body)
                // The handler may have closed us, which freed the bufferevent and its buffers.
                if state.contains(.closed) { return }
                consumed += frameLength
            }
            if consumed > 0 {
                evbuffer_drain(input, consumed)
            } else if !deliverStraddlingFrame(input) {
                return
            }
        }
    }

    /// Slow path for a frame whose header or body spans two buffer chunks: copy the
    /// header out, and only once the whole frame is buffered make it contiguous.
    private func deliverStraddlingFrame(_ input: OpaquePointer) -> Bool {
        let available = evbuffer_get_length(input)
        guard available >= FrameHeader.size else { return false }
        var raw: (UInt64, UInt64) = (0, 0)
        evbuffer_copyout(input, &raw, FrameHeader.size)
        let limit = maxFrame
        let parsed = withUnsafeBytes(of: &raw) { bytes -> Result<FrameHeader, WireError> in
            do throws(WireError) {
                return .success(try FrameHeader.parse(bytes, maxFrame: limit))
            } catch {
                return .failure(error)
            }
        }
        let header: FrameHeader
        switch parsed {
        case .success(let value): header = value
        case .failure(let error):
            framingError(error)
            return false
        }
        let frameLength = header.frameLength
        guard available >= frameLength else { return false }
        guard let start = evbuffer_pullup(input, frameLength) else {
            close(reason: .error(errno: ENOMEM))
            return false
        }
        let body = UnsafeRawBufferPointer(start: start + FrameHeader.size, count: Int(header.bodyLength))
        handler?.onFrame(self, header: header, body: body)
        if state.contains(.closed) { return false }
        evbuffer_drain(input, frameLength)
        return true
    }

    private func framingError(_ error: WireError) {
        state.insert(.readStopped)
        updateReading()
        if let handler {
            handler.onFramingError(self, error: error)
        } else {
            close(reason: .framingError(error))
        }
    }

    // MARK: - Writing

    /// Queues bytes for the peer. Returns false if the connection is closed, closing,
    /// or was just cut off for going over `maxOutputBytes`.
    @discardableResult
    public func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let bev, !state.contains(.closingAfterFlush) else { return false }
        let output = bufferevent_get_output(bev)
        if let base = bytes.baseAddress, bytes.count > 0, evbuffer_add(output, base, bytes.count) != 0 {
            close(reason: .error(errno: ENOMEM))
            return false
        }
        if evbuffer_get_length(output) > maxOutputBytes { return overCap() }
        return true
    }

    @discardableResult
    public func write(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { write($0) }
    }

    private func overCap() -> Bool {
        let action = handler?.onBackpressure(self) ?? .close
        guard isOpen else { return false }
        switch action {
        case .close:
            close(reason: .slowConsumer)
            return false
        case .keepOpen:
            if !state.contains(.overCap) {
                state.insert(.overCap)
                updateWriteWatch()
            }
            return true
        }
    }

    /// The write callback is installed only while someone waits for the output to
    /// drain, so the common path pays nothing for it.
    private func updateWriteWatch() {
        guard let bev else { return }
        let context = Unmanaged.passUnretained(self).toOpaque()
        if state.contains(.closingAfterFlush) {
            bufferevent_setwatermark(bev, sp_EV_WRITE, 0, 0)
            bufferevent_setcb(bev, connectionReadCallback, connectionWriteCallback, connectionEventCallback, context)
        } else if state.contains(.overCap) {
            bufferevent_setwatermark(bev, sp_EV_WRITE, maxOutputBytes / 2, 0)
            bufferevent_setcb(bev, connectionReadCallback, connectionWriteCallback, connectionEventCallback, context)
        } else {
            bufferevent_setwatermark(bev, sp_EV_WRITE, 0, 0)
            bufferevent_setcb(bev, connectionReadCallback, nil, connectionEventCallback, context)
        }
    }

    fileprivate func drained() {
        guard let bev else { return }
        let queued = evbuffer_get_length(bufferevent_get_output(bev))
        if state.contains(.closingAfterFlush) {
            if queued == 0 { close(reason: pendingCloseReason ?? .local) }
            return
        }
        if state.contains(.overCap), queued <= maxOutputBytes / 2 {
            state.remove(.overCap)
            updateWriteWatch()
            handler?.onOutputDrained(self)
        }
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

    fileprivate func event(_ what: Int16) {
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
        startReading()
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

private func connectionReadCallback(_ bev: OpaquePointer?, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let connection = Unmanaged<Connection>.fromOpaque(context).takeUnretainedValue()
    withExtendedLifetime(connection) { connection.readable() }
}

private func connectionWriteCallback(_ bev: OpaquePointer?, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let connection = Unmanaged<Connection>.fromOpaque(context).takeUnretainedValue()
    withExtendedLifetime(connection) { connection.drained() }
}

private func connectionEventCallback(_ bev: OpaquePointer?, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let connection = Unmanaged<Connection>.fromOpaque(context).takeUnretainedValue()
    withExtendedLifetime(connection) { connection.event(what) }
}

/// Latency over throughput for a request/response protocol: small frames go out now.
func setNoDelay(_ fd: Int32) {
    var one: Int32 = 1
    _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
}
