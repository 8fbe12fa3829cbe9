import CLibevent
import Glibc

/// Listening TCP sockets on a loop, one per address the host stands for; hands each
/// accepted peer to `onAccept` as an open `Connection` (TLS connections start their
/// handshake immediately). Loop-confined.
///
/// `onAccept` should install the connection's handler: reading starts when it returns.
///
/// Addresses: a numeric host is bound as it is. A name is resolved once, here (a blocking
/// lookup, at start), and every address it gives is bound on the same port: `localhost`
/// may mean both 127.0.0.1 and ::1. With port 0 the first address picks the port and the
/// others take the same one. `[::]` alone listens dual-stack (IPv4 peers show as
/// `::ffff:a.b.c.d`); with several addresses each IPv6 socket is IPv6-only, so `0.0.0.0`
/// and `::` can both be bound. An address of a name that the host cannot bind (no IPv6 on
/// this machine) is skipped as long as another one is bound.
///
/// Out of file descriptors (EMFILE, ENFILE), accept() fails and the client would wait in
/// the kernel's backlog with nothing said. The listener keeps one spare descriptor
/// (/dev/null) for that moment: it closes it, accepts each waiting connection with the
/// freed slot and closes it at once, so the client sees its connection closed promptly,
/// then takes the spare again, and reports the refusals to `onRefused`.
public final class Listener: LoopResource {
    public let loop: EventLoop
    public let tls: TLSContext?
    /// The first bound address, with the real port when 0 was asked for.
    public var address: SocketAddress { addresses[0] }
    /// Every bound address, in the resolver's order; all share one port.
    public let addresses: [SocketAddress]
    /// Called when accept() fails for a reason other than a transient one.
    public var onAcceptError: ((EventLoopError) -> Void)?
    /// Called with the errno and the count when connections were accepted and closed at
    /// once because the process (or the system) had no file descriptor to serve them.
    public var onRefused: ((_ errno: Int32, _ count: Int) -> Void)?
    /// Sees each accepted socket before anything is made of it, and answers true when it
    /// has taken it elsewhere (another loop's listener, through `takeOver`): a service on
    /// several loops places its connections at accept, before a byte is read.
    public var dispatch: ((Int32) -> Bool)?
    private(set) var listeners: [OpaquePointer] = []
    /// Other descriptors (dups held by other loops' listeners) share the sockets: see
    /// `close()`.
    var isShared = false
    private var onAccept: ((Connection) -> Void)?
    private var retryTimer: LoopTimer?
    /// The spare descriptor given up to refuse connections at EMFILE; -1 while it is not held.
    private(set) var reserveFD: Int32 = -1
    /// Connections refused per pass at EMFILE; a longer backlog is refused over the next
    /// passes, since the listening sockets stay readable.
    static let refusalsPerPass = 64
    /// With port 0 and several addresses, the port the first one got may be taken on
    /// another: start over with a fresh port this many times.
    static let portPickAttempts = 8

    public var port: Int { addresses[0].port }
    public var isOpen: Bool { !listeners.isEmpty }

    /// Binds every address `host` stands for (see the type's notes) on `port` (0: any free
    /// port) with SO_REUSEADDR, and listens with `backlog` (the kernel caps it at somaxconn).
    public convenience init(
        loop: EventLoop, host: String, port: Int, tls: TLSContext? = nil, backlog: Int32 = 4096,
        onAccept: @escaping (Connection) -> Void
    ) throws(EventLoopError) {
        guard loop.acceptsNewResources else { throw .libevent("the event loop has shut down") }
        let addresses = try SocketAddress.resolve(host: host, port: port, forListening: true)
        try self.init(loop: loop, addresses: addresses, tls: tls, backlog: backlog, onAccept: onAccept)
    }

    /// Binds each of `addresses` (resolved already; a port 0 in the first is picked by the
    /// kernel and used for all) and listens on them.
    public convenience init(
        loop: EventLoop, addresses requested: [SocketAddress], tls: TLSContext? = nil, backlog: Int32 = 4096,
        onAccept: @escaping (Connection) -> Void
    ) throws(EventLoopError) {
        guard loop.acceptsNewResources else { throw .libevent("the event loop has shut down") }
        guard !requested.isEmpty else { throw .invalidAddress("no address to listen on") }
        let bound = try Listener.bindAll(requested)
        try self.init(loop: loop, sockets: bound, tls: tls, backlog: backlog, shared: false, onAccept: onAccept)
    }

    /// Listens on `bound` (closed here on failure); a `backlog` of 0 leaves sockets that
    /// listen already as they are.
    init(
        loop: EventLoop, sockets bound: [BoundSocket], tls: TLSContext?, backlog: Int32, shared: Bool,
        onAccept: @escaping (Connection) -> Void
    ) throws(EventLoopError) {
        self.loop = loop
        self.isShared = shared
        self.tls = tls
        self.addresses = bound.map(\.address)
        self.onAccept = onAccept
        // evconnlistener_new calls listen(); accepted sockets come back non-blocking and
        // close-on-exec (accept4). The sockets are closed in `close()`, not on free.
        let context = Unmanaged.passUnretained(self).toOpaque()
        for socket in bound {
            guard let listener = evconnlistener_new(loop.base, listenerAcceptCallback, context,
                                                    sp_LEV_OPT_CLOSE_ON_EXEC, backlog, socket.fd)
            else {
                let code = errno
                for made in listeners { evconnlistener_free(made) }
                listeners = []
                for socket in bound { Glibc.close(socket.fd) }
                throw .system(operation: "listen \(socket.address)", errno: code)
            }
            evconnlistener_set_error_cb(listener, listenerErrorCallback)
            listeners.append(listener)
        }
        reserveFD = Listener.openReserve()
        loop.register(self)
        // Held by the C side until close(), like a connection.
        _ = Unmanaged.passRetained(self)
    }

    struct BoundSocket {
        let fd: Int32
        let address: SocketAddress
    }

    /// Binds every address (all on the first one's port); the sockets, not yet listening.
    static func bindAll(_ requested: [SocketAddress]) throws(EventLoopError) -> [BoundSocket] {
        let pickingPort = requested[0].port == 0 && requested.count > 1
        var attempt = 1
        while true {
            do {
                return try bindEach(requested)
            } catch {
                // The port the first address got is taken on another one: pick again.
                guard pickingPort, attempt < portPickAttempts, case .system(_, EADDRINUSE) = error else { throw error }
                attempt += 1
            }
        }
    }

    private static func bindEach(_ requested: [SocketAddress]) throws(EventLoopError) -> [BoundSocket] {
        var bound: [BoundSocket] = []
        var port = requested[0].port
        // One IPv6 wildcard alone serves IPv4 too; next to other addresses it must not.
        let dualStack = requested.count == 1 && requested[0].isIPv6 && requested[0].isUnspecified
        for (index, address) in requested.enumerated() {
            let wanted = address.withPort(port)
            switch bindOne(wanted, ipv6Only: !dualStack) {
            case .success(let socket):
                if bound.isEmpty { port = socket.address.port }
                bound.append(socket)
            case .failure(let error):
                // A name's address this host cannot have (IPv6 turned off): do without it.
                if case .system(_, let code) = error, code == EADDRNOTAVAIL || code == EAFNOSUPPORT,
                   requested.count > 1, !(index == requested.count - 1 && bound.isEmpty) {
                    continue
                }
                for socket in bound { Glibc.close(socket.fd) }
                throw error
            }
        }
        return bound
    }

    private static func bindOne(_ address: SocketAddress, ipv6Only: Bool) -> Result<BoundSocket, EventLoopError> {
        let fd = socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
                            | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .failure(.system(operation: "socket for \(address)", errno: errno)) }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if address.isIPv6 {
            var flag: Int32 = ipv6Only ? 1 : 0
            _ = setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &flag, socklen_t(MemoryLayout<Int32>.size))
        }
        guard address.withSockAddr({ Glibc.bind(fd, $0, $1) }) == 0 else {
            let code = errno
            Glibc.close(fd)
            return .failure(.system(operation: "bind \(address)", errno: code))
        }
        guard let actual = SocketAddress.local(of: fd) else {
            let code = errno
            Glibc.close(fd)
            return .failure(.system(operation: "getsockname", errno: code))
        }
        return .success(BoundSocket(fd: fd, address: actual))
    }

    /// Stops listening and closes the socket; accepted connections are unaffected.
    /// Idempotent.
    public func close() {
        guard !listeners.isEmpty else { return }
        for listener in listeners {
            let fd = evconnlistener_get_fd(listener)
            evconnlistener_free(listener)
            if isShared {
                loop.closeAfterPendingChanges(fd)
            } else {
                Glibc.close(fd)
            }
        }
        listeners = []
        onAccept = nil
        onAcceptError = nil
        onRefused = nil
        dispatch = nil
        retryTimer?.cancel()
        retryTimer = nil
        if reserveFD >= 0 { Glibc.close(reserveFD) }
        reserveFD = -1
        loop.unregister(self)
        Unmanaged.passUnretained(self).release()
    }

    func closeForShutdown() { close() }

    fileprivate func accepted(_ fd: Int32) {
        if let dispatch, dispatch(fd) { return }
        takeOver(fd)
    }

    /// Serves `fd`, a socket accepted by a listener on the same sockets on another loop, as
    /// if this one had accepted it (its TLS handshake starts here). Call on this loop; a
    /// closed listener closes it.
    public func takeOver(_ fd: Int32) {
        guard let onAccept else {
            Glibc.close(fd)
            return
        }
        guard let connection = Connection.accepted(loop: loop, fd: fd, tls: tls) else { return }
        onAccept(connection)
        connection.startIO()
    }

    /// accept() failed with `code` (internal so a test can stand in for the kernel).
    func acceptFailed(errno code: Int32) {
        guard !listeners.isEmpty else { return }
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
    /// in the backlogs (up to `refusalsPerPass`), and takes the spare again. The count refused.
    func refuseWaitingConnections() -> Int {
        guard !listeners.isEmpty else { return 0 }
        if reserveFD < 0 { reserveFD = Listener.openReserve() }
        guard reserveFD >= 0 else { return 0 }
        Glibc.close(reserveFD)
        reserveFD = -1
        var refused = 0
        for listener in listeners {
            let fd = evconnlistener_get_fd(listener)
            while refused < Listener.refusalsPerPass {
                // Closed at once, so the flags accept4 would set do not matter (Glibc does not export it).
                let client = Glibc.accept(fd, nil, nil)
                guard client >= 0 else { break }
                Glibc.close(client)
                refused += 1
            }
        }
        reserveFD = Listener.openReserve()
        return refused
    }

    /// The pending connection stays queued and the socket stays readable: without a pause,
    /// a level-triggered loop would spin on accept() until an fd frees up.
    private func pause() {
        guard !listeners.isEmpty, retryTimer == nil else { return }
        for listener in listeners { evconnlistener_disable(listener) }
        retryTimer = loop.schedule(after: .milliseconds(100)) { [weak self] in
            guard let self, !self.listeners.isEmpty else { return }
            self.retryTimer = nil
            if self.reserveFD < 0 { self.reserveFD = Listener.openReserve() }
            for listener in self.listeners { evconnlistener_enable(listener) }
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
