import CLibevent
import Glibc

/// A listening TCP socket on a loop; hands each accepted peer to `onAccept` as an open
/// `Connection` (TLS connections start their handshake immediately). Loop-confined.
///
/// `onAccept` should install the connection's handler: reading starts when it returns.
///
/// Out of file descriptors (EMFILE, ENFILE), accept() fails and the client would wait in
/// the kernel's backlog with nothing said. The listener keeps one spare descriptor
/// (/dev/null) for that moment: it closes it, accepts each waiting connection with the
/// freed slot and closes it at once, so the client sees its connection closed promptly,
/// then takes the spare again, and reports the refusals to `onRefused`.
public final class Listener: LoopResource {
    public let loop: EventLoop
    public let tls: TLSContext?
    /// The bound address, with the real port when 0 was asked for.
    public let address: SocketAddress
    /// Called when accept() fails for a reason other than a transient one.
    public var onAcceptError: ((EventLoopError) -> Void)?
    /// Called with the errno and the count when connections were accepted and closed at
    /// once because the process (or the system) had no file descriptor to serve them.
    public var onRefused: ((_ errno: Int32, _ count: Int) -> Void)?
    private var listener: OpaquePointer?
    private var onAccept: ((Connection) -> Void)?
    private var retryTimer: LoopTimer?
    /// The spare descriptor given up to refuse connections at EMFILE; -1 while it is not held.
    private(set) var reserveFD: Int32 = -1
    /// Connections refused per pass at EMFILE; a longer backlog is refused over the next
    /// passes, since the listening socket stays readable.
    static let refusalsPerPass = 64

    public var port: Int { address.port }
    public var isOpen: Bool { listener != nil }

    /// Binds `host` (a numeric IPv4 or IPv6 address) and `port` (0: any free port) with
    /// SO_REUSEADDR, and listens with `backlog` (the kernel caps it at somaxconn).
    public init(
        loop: EventLoop, host: String, port: Int, tls: TLSContext? = nil, backlog: Int32 = 4096,
        onAccept: @escaping (Connection) -> Void
    ) throws(EventLoopError) {
        guard loop.acceptsNewResources else { throw .libevent("the event loop has shut down") }
        let requested = try SocketAddress(host: host, port: port)
        let fd = socket(requested.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
                            | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .system(operation: "socket", errno: errno) }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound = requested.withSockAddr { Glibc.bind(fd, $0, $1) }
        guard bound == 0 else {
            let code = errno
            Glibc.close(fd)
            throw .system(operation: "bind \(requested)", errno: code)
        }
        guard let actual = SocketAddress.local(of: fd) else {
            let code = errno
            Glibc.close(fd)
            throw .system(operation: "getsockname", errno: code)
        }
        self.loop = loop
        self.tls = tls
        self.address = actual
        self.onAccept = onAccept
        // evconnlistener_new calls listen(); accepted sockets come back non-blocking and
        // close-on-exec (accept4).
        let context = Unmanaged.passUnretained(self).toOpaque()
        guard let listener = evconnlistener_new(loop.base, listenerAcceptCallback, context,
                                                sp_LEV_OPT_CLOSE_ON_FREE | sp_LEV_OPT_CLOSE_ON_EXEC,
                                                backlog, fd)
        else {
            let code = errno
            Glibc.close(fd)
            throw .system(operation: "listen \(actual)", errno: code)
        }
        evconnlistener_set_error_cb(listener, listenerErrorCallback)
        self.listener = listener
        reserveFD = Listener.openReserve()
        loop.register(self)
        // Held by the C side until close(), like a connection.
        _ = Unmanaged.passRetained(self)
    }

    /// Stops listening and closes the socket; accepted connections are unaffected.
    /// Idempotent.
    public func close() {
        guard let listener else { return }
        evconnlistener_free(listener)
        self.listener = nil
        onAccept = nil
        onAcceptError = nil
        onRefused = nil
        retryTimer?.cancel()
        retryTimer = nil
        if reserveFD >= 0 { Glibc.close(reserveFD) }
        reserveFD = -1
        loop.unregister(self)
        Unmanaged.passUnretained(self).release()
    }

    func closeForShutdown() { close() }

    fileprivate func accepted(_ fd: Int32) {
        guard let onAccept, let connection = Connection.accepted(loop: loop, fd: fd, tls: tls) else { return }
        onAccept(connection)
        connection.startIO()
    }

    /// accept() failed with `code` (internal so a test can stand in for the kernel).
    func acceptFailed(errno code: Int32) {
        guard listener != nil else { return }
        switch code {
        case EMFILE, ENFILE:
            let refused = refuseWaitingConnections()
            if refused > 0 { onRefused?(code, refused) }
            // Without the spare (another thread took the slot), fall back to a pause.
            if refused == 0 || reserveFD < 0 { pause() }
            if refused > 0 { return }
        case ENOBUFS, ENOMEM:
            pause()
        default:
            break
        }
        onAcceptError?(.system(operation: "accept on \(address)", errno: code))
    }

    /// Gives up the spare descriptor, accepts and closes at once each connection waiting
    /// in the backlog (up to `refusalsPerPass`), and takes the spare again. The count refused.
    func refuseWaitingConnections() -> Int {
        guard let listener else { return 0 }
        if reserveFD < 0 { reserveFD = Listener.openReserve() }
        guard reserveFD >= 0 else { return 0 }
        Glibc.close(reserveFD)
        reserveFD = -1
        let fd = evconnlistener_get_fd(listener)
        var refused = 0
        while refused < Listener.refusalsPerPass {
            // Closed at once, so the flags accept4 would set do not matter (Glibc does not export it).
            let client = Glibc.accept(fd, nil, nil)
            guard client >= 0 else { break }
            Glibc.close(client)
            refused += 1
        }
        reserveFD = Listener.openReserve()
        return refused
    }

    /// The pending connection stays queued and the socket stays readable: without a pause,
    /// a level-triggered loop would spin on accept() until an fd frees up.
    private func pause() {
        guard let listener, retryTimer == nil else { return }
        evconnlistener_disable(listener)
        retryTimer = loop.schedule(after: .milliseconds(100)) { [weak self] in
            guard let self, let listener = self.listener else { return }
            self.retryTimer = nil
            if self.reserveFD < 0 { self.reserveFD = Listener.openReserve() }
            evconnlistener_enable(listener)
        }
    }

    private static func openReserve() -> Int32 {
        open("/dev/null", O_RDONLY | O_CLOEXEC)
    }
}

extension Connection {
    /// Wraps a freshly accepted socket; nil (socket closed) only if allocation fails.
    static func accepted(loop: EventLoop, fd: Int32, tls: TLSContext?) -> Connection? {
        guard loop.acceptsNewResources else {
            Glibc.close(fd)
            return nil
        }
        setNoDelay(fd)
        let transport: (any Transport)? = if let tls {
            TLSTransport.accepting(loop: loop, fd: fd, context: tls)
        } else {
            PlainTCPTransport.make(loop: loop, fd: fd, connecting: false)
        }
        guard let transport else { return nil }
        return Connection(loop: loop, transport: transport, connecting: false)
    }
}

private func listenerAcceptCallback(
    _ listener: OpaquePointer?, _ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>?, _ length: Int32,
    _ context: UnsafeMutableRawPointer?
) {
    guard let context else {
        Glibc.close(fd)
        return
    }
    let owner = Unmanaged<Listener>.fromOpaque(context).takeUnretainedValue()
    withExtendedLifetime(owner) { owner.accepted(fd) }
}

private func listenerErrorCallback(_ listener: OpaquePointer?, _ context: UnsafeMutableRawPointer?) {
    let code = errno
    guard let context else { return }
    let owner = Unmanaged<Listener>.fromOpaque(context).takeUnretainedValue()
    withExtendedLifetime(owner) { owner.acceptFailed(errno: code) }
}
