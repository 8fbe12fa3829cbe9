import CLibevent
import Glibc

/// A listener's sockets, for listeners on other loops to accept from the same kernel
/// queues: several loop threads, one port, each accepted connection owned by the loop
/// that accepted it.
///
/// Every such loop watches the same listening sockets (through descriptors of its own), so
/// a new connection may wake more than one of them; the ones that lose the race get
/// EAGAIN from accept(), which libevent ignores. SO_REUSEPORT would spread connections
/// without that, but would also let a second process bind the port by mistake.
///
/// Holds its own duplicates of the descriptors (closed when it is released), so it stays
/// valid whatever happens to the listener it came from. `Sendable`: immutable, and a
/// TLSContext may serve several loops (see its notes).
public final class SharedListenSockets: Sendable {
    public let addresses: [SocketAddress]
    public let tls: TLSContext?
    let descriptors: [Int32]

    init(addresses: [SocketAddress], tls: TLSContext?, descriptors: [Int32]) {
        self.addresses = addresses
        self.tls = tls
        self.descriptors = descriptors
    }

    deinit {
        // Never watched by any loop, so closing them cannot leave an epoll registration.
        for fd in descriptors { Glibc.close(fd) }
    }

    public var port: Int { addresses[0].port }
}

extension Listener {
    /// The sockets this listener accepts on, for `Listener(loop:sharing:onAccept:)` on
    /// other loops. Loop thread; the listener must be open.
    public func sharedSockets() throws(EventLoopError) -> SharedListenSockets {
        guard isOpen else { throw .libevent("the listener is closed") }
        let copies = try Listener.duplicate(listeners.map { evconnlistener_get_fd($0) })
        // From now on its sockets have other descriptors: see `close()`.
        isShared = true
        return SharedListenSockets(addresses: addresses, tls: tls, descriptors: copies)
    }

    /// Accepts on `loop` from the sockets of a listener on another loop, with its TLS
    /// context. Closing either listener leaves the other accepting.
    public convenience init(
        loop: EventLoop, sharing shared: SharedListenSockets, onAccept: @escaping (Connection) -> Void
    ) throws(EventLoopError) {
        guard loop.acceptsNewResources else { throw .libevent("the event loop has shut down") }
        let copies = try Listener.duplicate(shared.descriptors)
        let sockets = zip(copies, shared.addresses).map { BoundSocket(fd: $0, address: $1) }
        // Backlog 0: the sockets listen already.
        try self.init(loop: loop, sockets: sockets, tls: shared.tls, backlog: 0, shared: true, onAccept: onAccept)
    }

    /// Close-on-exec duplicates of `descriptors`; none if one cannot be made.
    static func duplicate(_ descriptors: [Int32]) throws(EventLoopError) -> [Int32] {
        var copies: [Int32] = []
        for fd in descriptors {
            let copy = fcntl(fd, F_DUPFD_CLOEXEC, 0)
            guard copy >= 0 else {
                let code = errno
                for made in copies { Glibc.close(made) }
                throw .system(operation: "dup of a listening socket", errno: code)
            }
            copies.append(copy)
        }
        return copies
    }
}

extension EventLoop {
    /// Closes `fd`, whose events were just freed, on a later pass: for a socket that other
    /// descriptors share (a listening socket dup()ed for other loops). With the changelist,
    /// event_del only queues the EPOLL_CTL_DEL until the next epoll_wait; closed before
    /// that, the DEL would fail (EBADF) and the socket, kept open by the other descriptors,
    /// would stay in this loop's epoll set for good, waking it for every new connection.
    func closeAfterPendingChanges(_ fd: Int32) {
        guard acceptsNewResources else {
            // Shutting down: the epoll set goes with the base.
            Glibc.close(fd)
            return
        }
        descriptorsToClose.append(fd)
        guard descriptorsToClose.count == 1 else { return }
        // A zero timer fires after the next epoll_wait, which applies the changelist first.
        schedule(after: .zero) { [unowned self] in
            for fd in descriptorsToClose { Glibc.close(fd) }
            descriptorsToClose = []
        }
    }
}
