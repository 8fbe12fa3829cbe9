import CLibevent
import Glibc

/// TLS through libevent's OpenSSL bufferevent, which owns the socket's reads and writes.
/// Its input is taken with `evbuffer_remove` into the loop's scratch buffer, so frames go
/// through the same decoder as plain TCP's.
final class TLSTransport: Transport {
    unowned(unsafe) var owner: Connection?
    private var bev: OpaquePointer?
    private var connecting: Bool

    var isTLS: Bool { true }
    var readsAhead: Bool { true }
    var fd: Int32 {
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

    private init(bev: OpaquePointer, connecting: Bool) {
        self.bev = bev
        self.connecting = connecting
        let context = Unmanaged.passUnretained(self).toOpaque()
        bufferevent_setcb(bev, tlsReadCallback, nil, tlsEventCallback, context)
    }

    deinit { close(clean: false) }

    /// The server side of an accepted socket; nil (socket closed, as far as libevent
    /// lets us know) if allocation fails.
    static func accepting(loop: EventLoop, fd: Int32, context: TLSContext) -> TLSTransport? {
        guard let ssl = context.makeServerSSL() else {
            Glibc.close(fd)
            return nil
        }
        guard let bev = bufferevent_openssl_socket_new(loop.base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                                       sp_BEV_OPT_CLOSE_ON_FREE)
        else {
            // libevent did not take the SSL object; whether it closed the fd on this
            // (allocation-failure) path is unclear, and leaking beats a double close.
            SSL_free(ssl)
            return nil
        }
        // Our frames carry their own lengths, so a missing close_notify cannot truncate
        // a message undetected; treat it as a plain EOF.
        bufferevent_openssl_set_allow_dirty_shutdown(bev, 1)
        return TLSTransport(bev: bev, connecting: false)
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
        guard let bev = bufferevent_openssl_socket_new(loop.base, fd, ssl, BUFFEREVENT_SSL_CONNECTING,
                                                       sp_BEV_OPT_CLOSE_ON_FREE)
        else {
            SSL_free(ssl)
            return .failure(.system(errno: ENOMEM))
        }
        return .success(TLSTransport(bev: bev, connecting: true))
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
    }

    func close(clean: Bool) {
        guard let bev else { return }
        self.bev = nil
        if clean { TLSContext.sendCloseNotify(bev) }
        // Frees the socket too (BEV_OPT_CLOSE_ON_FREE). Safe from inside a bufferevent
        // callback: libevent defers the actual free until the callback returns.
        bufferevent_free(bev)
    }

    fileprivate func event(_ what: Int16, owner: Connection) {
        let code = errno
        guard let bev else { return }
        if what & sp_BEV_EVENT_CONNECTED != 0 {
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
            if let message = TLSContext.errorMessage(for: bev) {
                owner.transportFailed(.tlsError(message))
            } else {
                owner.transportFailed(.error(errno: code == 0 ? EIO : code))
            }
        }
    }

    private func connectError(errno code: Int32, bev: OpaquePointer) -> ConnectError {
        if code == ECONNREFUSED { return .refused }
        if let message = TLSContext.errorMessage(for: bev) { return .tls(message) }
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

private func tlsEventCallback(_ bev: OpaquePointer?, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    let code = errno
    guard let context else { return }
    let transport = Unmanaged<TLSTransport>.fromOpaque(context).takeUnretainedValue()
    guard let owner = transport.owner else { return }
    errno = code
    withExtendedLifetime(owner) { transport.event(what, owner: owner) }
}
