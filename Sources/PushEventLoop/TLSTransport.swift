import CLibevent
import Glibc
import PushWire

/// TLS through libevent's OpenSSL bufferevent, which owns the socket's reads and writes.
/// Its input is taken with `evbuffer_remove` into the loop's scratch buffer, so frames go
/// through the same decoder as plain TCP's.
///
/// The server side looks at the first byte a client sends before OpenSSL does: a plain
/// securepush client's HELLO starts with the frame magic, which OpenSSL would take for
/// the start of a 10 KB SSLv2 record and wait for in silence until the client timed out.
/// Such a client gets a plain GOAWAY saying the port speaks TLS, and is closed.
final class TLSTransport: Transport {
    unowned(unsafe) var owner: Connection?
    private let loop: EventLoop
    private var bev: OpaquePointer?
    private var connecting: Bool
    /// The handshake has completed: OpenSSL writes (and the bufferevent's timeouts run).
    private var established = false
    /// A close-after-flush's patience while the handshake is not done: the bufferevent
    /// neither writes nor times out before it, so a client that never speaks would hold
    /// the connection open for ever.
    private var unestablishedFlushTimer: LoopTimer?
    /// The accepted socket while its first byte is awaited; -1 once OpenSSL has it.
    private var sniffFD: Int32 = -1
    private var sniffEvent: OpaquePointer?

    var isTLS: Bool { true }
    var readsAhead: Bool { true }
    var fd: Int32 {
        if sniffFD >= 0 { return sniffFD }
        guard let bev else { return -1 }
        return bufferevent_getfd(bev)
    }
    var outputBufferedBytes: Int {
        guard let bev else { return 0 }
        return evbuffer_get_length(bufferevent_get_output(bev))
    }
    var inputBufferedBytes: Int {
        guard let bev else { return 0 }
        return evbuffer_get_length(bufferevent_get_input(bev))
    }

    private init(loop: EventLoop, bev: OpaquePointer, connecting: Bool) {
        self.loop = loop
        self.bev = bev
        self.connecting = connecting
        let context = Unmanaged.passUnretained(self).toOpaque()
        bufferevent_setcb(bev, tlsReadCallback, nil, tlsEventCallback, context)
    }

    deinit { close(clean: false) }

    /// The server side of an accepted socket (closed here if allocation fails, which
    /// returns nil). The handshake starts once the first byte shows a TLS client.
    static func accepting(loop: EventLoop, fd: Int32, context: TLSContext) -> TLSTransport? {
        guard let ssl = context.makeServerSSL() else {
            Glibc.close(fd)
            return nil
        }
        // No socket yet: OpenSSL gets it in `firstBytesArrived`.
        guard let transport = serverSide(loop: loop, bevFD: -1, ownedFD: fd, ssl: ssl, state: BUFFEREVENT_SSL_ACCEPTING) else {
            return nil
        }
        transport.sniffFD = fd
        let context = Unmanaged.passUnretained(transport).toOpaque()
        guard let event = event_new(loop.base, fd, sp_EV_READ | sp_EV_PERSIST, tlsSniffCallback, context) else {
            transport.close(clean: false)
            return nil
        }
        transport.sniffEvent = event
        event_add(event, nil)
        return transport
    }

    /// The accepted socket is readable: a TLS ClientHello goes to OpenSSL, a securepush
    /// frame gets the GOAWAY.
    fileprivate func firstBytesArrived(owner: Connection) {
        guard sniffFD >= 0, let bev else { return }
        var first: UInt8 = 0
        let count = recv(sniffFD, &first, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
        let code = errno
        if count < 0 {
            if code == EAGAIN || code == EWOULDBLOCK || code == EINTR { return }
            owner.transportFailed(.error(errno: code))
            return
        }
        if count == 0 {
            owner.transportFailed(.peerClosed)
            return
        }
        let fd = sniffFD
        stopSniffing()
        guard first != FrameHeader.magic else {
            refusePlainClient(fd)
            owner.transportFailed(.tlsError("a plain TCP client on this TLS port; it was told to use TLS"))
            return
        }
        // From here on the socket is the bufferevent's, closed with it (see `freeTLSBufferevent`).
        bufferevent_setfd(bev, fd)
    }

    /// Reads what the client sent (so the close is a FIN, not a reset that could beat the
    /// GOAWAY to it), sends the GOAWAY and closes the socket.
    private func refusePlainClient(_ fd: Int32) {
        var discard = [UInt8](repeating: 0, count: 4096)
        for _ in 0..<16 {
            guard recv(fd, &discard, discard.count, Int32(MSG_DONTWAIT)) > 0 else { break }
        }
        let goaway = Message.goaway(Goaway(status: .badRequest, lastCorrelation: 0, message: TLSContext.plainClientNotice))
        let frame = goaway.encoded(correlation: 0)
        _ = frame.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
        Glibc.close(fd)
    }

    private func stopSniffing() {
        if let sniffEvent { event_free(sniffEvent) }
        sniffEvent = nil
        sniffFD = -1
    }

    /// The client side, handshake not yet started (see `connect(to:)`).
    static func connecting(loop: EventLoop, fd: Int32, context: TLSContext, serverName: String)
        -> Result<TLSTransport, ConnectError>
    {
        let ssl: OpaquePointer
        switch context.makeClientSSL(serverName: serverName) {
        case .success(let made): ssl = made
        case .failure(let error):
            Glibc.close(fd)
            return .failure(error)
        }
        guard let bev = bufferevent_openssl_socket_new(loop.base, fd, ssl, BUFFEREVENT_SSL_CONNECTING, 0)
        else {
            SSL_free(ssl)
            Glibc.close(fd)
            return .failure(.system(errno: ENOMEM))
        }
        return .success(TLSTransport(loop: loop, bev: bev, connecting: true))
    }

    func connect(to address: SocketAddress) -> Int32 {
        guard let bev else { return EBADF }
        // Completion (or refusal, even an immediate one) comes back through the event
        // callback on a later iteration.
        let started = address.withSockAddr { bufferevent_socket_connect(bev, $0, Int32($1)) }
        let code = errno
        return started == 0 ? 0 : (code == 0 ? EIO : code)
    }

    func startIO() {}

    func setReading(_ enabled: Bool) {
        guard let bev else { return }
        if enabled { bufferevent_enable(bev, sp_EV_READ) } else { bufferevent_disable(bev, sp_EV_READ) }
    }

    func triggerRead() {
        guard let bev else { return }
        bufferevent_trigger(bev, sp_EV_READ, Int32(BEV_TRIG_DEFER_CALLBACKS.rawValue))
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> ReadResult {
        guard let bev else { return .wouldBlock }
        let count = evbuffer_remove(bufferevent_get_input(bev), buffer.baseAddress, buffer.count)
        return count > 0 ? .bytes(Int(count)) : .wouldBlock
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard let bev else { return -1 }
        let output = bufferevent_get_output(bev)
        if let base = bytes.baseAddress, bytes.count > 0, evbuffer_add(output, base, bytes.count) != 0 { return -1 }
        return evbuffer_get_length(output)
    }

    /// The write callback is installed only while someone waits for the output to
    /// drain, so the common path pays nothing for it.
    func watchOutput(lowWater: Int?, timeout: Duration?) {
        guard let bev else { return }
        let context = Unmanaged.passUnretained(self).toOpaque()
        bufferevent_setwatermark(bev, sp_EV_WRITE, lowWater ?? 0, 0)
        bufferevent_setcb(bev, tlsReadCallback, lowWater == nil ? nil : tlsWriteCallback, tlsEventCallback, context)
        if let timeout {
            var deadline = timeval(timeout)
            bufferevent_set_timeouts(bev, nil, &deadline)
        } else {
            bufferevent_set_timeouts(bev, nil, nil)
        }
        unestablishedFlushTimer?.cancel()
        unestablishedFlushTimer = nil
        if let timeout, !established {
            unestablishedFlushTimer = loop.schedule(after: timeout) { [weak self] in
                guard let self, !self.established, self.bev != nil, let owner = self.owner else { return }
                withExtendedLifetime(owner) { owner.flushTimedOut() }
            }
        }
    }

    func close(clean: Bool) {
        unestablishedFlushTimer?.cancel()
        unestablishedFlushTimer = nil
        if sniffFD >= 0 {
            // The bufferevent never had the socket, so freeing it will not close it.
            let fd = sniffFD
            stopSniffing()
            Glibc.close(fd)
        }
        guard let bev else { return }
        self.bev = nil
        if clean { TLSContext.sendCloseNotify(bev) }
        freeTLSBufferevent(bev)
    }

    /// The server side of a session established on another loop (see ConnectionHandoff),
    /// in the open state, with the accepting path's options. Takes ownership of `fd` and
    /// `ssl` (released here if allocation fails, which returns nil).
    static func adopting(loop: EventLoop, fd: Int32, ssl: OpaquePointer) -> TLSTransport? {
        let transport = serverSide(loop: loop, bevFD: fd, ownedFD: fd, ssl: ssl, state: BUFFEREVENT_SSL_OPEN)
        transport?.established = true
        return transport
    }

    /// A server-side OpenSSL bufferevent over `ssl` in `state`, on `bevFD` (-1: none yet).
    /// Without BEV_OPT_CLOSE_ON_FREE (see `freeTLSBufferevent`). On failure `ssl` is freed
    /// and `ownedFD` closed.
    private static func serverSide(loop: EventLoop, bevFD: Int32, ownedFD: Int32, ssl: OpaquePointer,
                                   state: bufferevent_ssl_state) -> TLSTransport? {
        guard let bev = bufferevent_openssl_socket_new(loop.base, bevFD, ssl, state, 0) else {
            SSL_free(ssl)
            Glibc.close(ownedFD)
            return nil
        }
        // Our frames carry their own lengths, so a missing close_notify cannot truncate
        // a message undetected; treat it as a plain EOF.
        bufferevent_openssl_set_allow_dirty_shutdown(bev, 1)
        return TLSTransport(loop: loop, bev: bev, connecting: false)
    }

    func detach() -> DetachedSocket? {
        guard let bev, sniffFD < 0, established, !connecting, unestablishedFlushTimer == nil,
              evbuffer_get_length(bufferevent_get_output(bev)) == 0,
              let ssl = bufferevent_openssl_get_ssl(bev), SSL_is_init_finished(ssl) == 1
        else { return nil }
        let fd = bufferevent_getfd(bev)
        guard fd >= 0 else { return nil }
        let buffered = bufferevent_get_input(bev)
        var input = [UInt8](repeating: 0, count: evbuffer_get_length(buffered))
        if !input.isEmpty { input.removeLast(input.count - max(0, Int(evbuffer_remove(buffered, &input, input.count)))) }
        self.bev = nil
        // Not from inside a callback of this bufferevent (see the protocol), so once freed
        // nothing of libevent's touches the SSL again, and without BEV_OPT_CLOSE_ON_FREE or
        // the release chain its finalizer leaves the socket and the SSL alone.
        bufferevent_free(bev)
        // Bytes OpenSSL decrypted ahead (a record read beyond what was asked): taken now
        // without touching the socket, so none is stranded in the session.
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while SSL_pending(ssl) > 0 {
            let count = SSL_read(ssl, &chunk, Int32(min(Int(SSL_pending(ssl)), chunk.count)))
            guard count > 0 else { break }
            input += chunk[..<Int(count)]
        }
        ERR_clear_error()
        return DetachedSocket(fd: fd, ssl: ssl, input: input)
    }

    fileprivate func event(_ what: Int16, owner: Connection) {
        let code = errno
        guard let bev else { return }
        if what & sp_BEV_EVENT_CONNECTED != 0 {
            established = true
            unestablishedFlushTimer?.cancel()
            unestablishedFlushTimer = nil
            guard connecting else { return }
            connecting = false
            bufferevent_openssl_set_allow_dirty_shutdown(bev, 1)
            owner.transportConnected()
        } else if connecting {
            owner.connectFailed(connectError(errno: code, bev: bev))
        } else if what & sp_BEV_EVENT_TIMEOUT != 0 {
            owner.flushTimedOut()
        } else if what & sp_BEV_EVENT_EOF != 0 {
            owner.inputEnded()
        } else if what & sp_BEV_EVENT_ERROR != 0 {
            let failure = TLSContext.failure(for: bev)
            if !failure.isEmpty {
                owner.transportFailed(.tlsError(failure.message))
            } else {
                owner.transportFailed(.error(errno: code == 0 ? EIO : code))
            }
        }
    }

    private func connectError(errno code: Int32, bev: OpaquePointer) -> ConnectError {
        if code == ECONNREFUSED { return .refused }
        let failure = TLSContext.failure(for: bev)
        if failure.peerIsNotTLS { return .notTLS(failure.message) }
        if failure.peerClosedEarly { return .closedDuringHandshake }
        if !failure.isEmpty { return .tls(failure.message) }
        // errno is only meaningful if the failing call set it; a leftover EAGAIN is not.
        if code != 0 && code != EAGAIN && code != EINPROGRESS { return .system(errno: code) }
        // EOF with no error: the peer hung up mid-handshake.
        return .closedDuringHandshake
    }
}

private func tlsReadCallback(_ bev: OpaquePointer?, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let transport = Unmanaged<TLSTransport>.fromOpaque(context).takeUnretainedValue()
    guard let owner = transport.owner else { return }
    withExtendedLifetime(owner) { owner.readable() }
}

private func tlsWriteCallback(_ bev: OpaquePointer?, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let transport = Unmanaged<TLSTransport>.fromOpaque(context).takeUnretainedValue()
    guard let owner = transport.owner else { return }
    withExtendedLifetime(owner) { owner.outputWritten() }
}

private func tlsSniffCallback(_ fd: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let transport = Unmanaged<TLSTransport>.fromOpaque(context).takeUnretainedValue()
    guard let owner = transport.owner else { return }
    withExtendedLifetime(owner) { transport.firstBytesArrived(owner: owner) }
}

private func tlsEventCallback(_ bev: OpaquePointer?, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    let code = errno
    guard let context else { return }
    let transport = Unmanaged<TLSTransport>.fromOpaque(context).takeUnretainedValue()
    guard let owner = transport.owner else { return }
    errno = code
    withExtendedLifetime(owner) { transport.event(what, owner: owner) }
}
