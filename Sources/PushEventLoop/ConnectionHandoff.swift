import CLibevent
import Glibc
import PushClock
import PushWire

/// An open connection taken off its loop, on its way to another: the socket, the TLS
/// session if any, and every byte received and not yet delivered as frames, in order.
///
/// Made by `Connection.handOff(prepending:then:)` on the loop the connection leaves,
/// consumed by `Connection.adopt(_:on:install:)` on the loop it joins. A handoff that is
/// dropped without being adopted (a loop that refused the post, say) closes the socket
/// and frees the session, so nothing leaks.
///
/// `@unchecked Sendable`: it is owned by one thread at a time (the one that made it, then
/// the one it was passed to), and an `SSL` may move between threads as long as no two use
/// it at once; nothing here is touched by two threads concurrently.
public final class ConnectionHandoff: @unchecked Sendable {
    private var fd: Int32
    private var ssl: OpaquePointer?
    /// Delivered on the new loop before anything read from the socket there.
    private var bytes: [UInt8]

    init(fd: Int32, ssl: OpaquePointer?, bytes: [UInt8]) {
        self.fd = fd
        self.ssl = ssl
        self.bytes = bytes
    }

    deinit {
        if let ssl {
            // Best effort, one non-blocking write: the peer sees a clean TLS close rather
            // than a truncated stream.
            _ = SSL_shutdown(ssl)
            ERR_clear_error()
            SSL_free(ssl)
        }
        if fd >= 0 { Glibc.close(fd) }
    }

    /// How many received bytes travel with the connection (prepended ones included).
    public var bufferedByteCount: Int { bytes.count }

    /// Takes everything out; the handoff is then empty and its deinit does nothing.
    fileprivate func take() -> (fd: Int32, ssl: OpaquePointer?, bytes: [UInt8])? {
        guard fd >= 0 else { return nil }
        defer {
            fd = -1
            ssl = nil
            bytes = []
        }
        return (fd, ssl, bytes)
    }
}

/// What a connection keeps between `handOff` and the pass that detaches it.
struct PendingHandoff {
    var prefix: [UInt8]
    var completion: (ConnectionHandoff?) -> Void
}

extension Connection {
    /// Moves this connection off its loop, for `adopt(_:on:install:)` on another.
    ///
    /// Callable from inside the handler's `onFrame` (where the first frame says where the
    /// connection belongs): from the call on, no frame reaches the handler, nothing more
    /// is read and writes are refused; the bytes left in the current read stay buffered.
    /// On a later pass of this loop the connection detaches: its libevent objects are
    /// freed but not its socket or TLS session, it leaves the loop, and it is closed with
    /// its handler released WITHOUT `onClose`. `completion` then gets the handoff, which
    /// carries `prepending` first (e.g. the frame just handled, for the new owner to see),
    /// then the buffered bytes.
    ///
    /// `completion` is called exactly once, never from inside this call. It gets nil when
    /// the connection cannot move:
    /// - on that later pass it still has output queued, or its transport cannot detach
    ///   (a TLS connection still in its handshake): it is then closed normally (`onClose`
    ///   with `.local`, then completion);
    /// - it closes before that pass (peer, `close()`, loop shutdown): completion right
    ///   after `onClose`; `closeAfterFlush` meanwhile cancels the handoff (nil, and the
    ///   connection goes on closing);
    /// - it was not open, or a handoff was already under way: nil on a later pass, and
    ///   nothing else changes.
    public func handOff(prepending prefix: [UInt8] = [], then completion: @escaping (ConnectionHandoff?) -> Void) {
        guard phase == .open, pendingHandoff == nil else {
            loop.schedule(after: .zero) { completion(nil) }
            return
        }
        phase = .handingOff
        pendingHandoff = PendingHandoff(prefix: prefix, completion: completion)
        updateReading()
        // A timer, so that the read now under way (perhaps inside a libevent callback that
        // goes on using the transport after ours returns) has unwound first.
        loop.schedule(after: .zero) { [self] in detachForHandoff() }
    }

    private func detachForHandoff() {
        guard let pending = pendingHandoff else { return }  // closed meanwhile: reported
        guard phase == .handingOff else {
            // closeAfterFlush was called meanwhile.
            pendingHandoff = nil
            pending.completion(nil)
            return
        }
        // Taken before the transport detaches, so a failure leaves everything in place.
        guard decoder.error == nil, case let held = decoder.bufferedBytes,
              let socket = transport.detach()
        else {
            close(reason: .local)  // which reports nil
            return
        }
        phase = .closed
        loop.unlinkConnection(self)
        pendingHandoff = nil
        decoder.discardBuffered()
        partialFrameSinceMillis = nil
        handler = nil
        let handoff = ConnectionHandoff(fd: socket.fd, ssl: socket.ssl, bytes: pending.prefix + held + socket.input)
        // The timer's closure holds self until this returns.
        Unmanaged.passUnretained(self).release()
        pending.completion(handoff)
    }

    /// Wraps a handed-over connection on `loop` (call on its thread): `install` sets the
    /// handler and limits as a listener's `onAccept` would, then reading starts, and the
    /// bytes that came with the handoff are delivered as frames, on a later pass and
    /// before anything read here from the socket. For framed connections only.
    ///
    /// Returns nil if the loop is shutting down (the handoff is left untouched, and
    /// closes the socket when dropped) or allocation fails (the socket is closed).
    public static func adopt(
        _ handoff: ConnectionHandoff, on loop: EventLoop, install: (Connection) -> Void
    ) -> Connection? {
        precondition(loop.isInLoopThread, "Connection.adopt must be called on the loop's thread")
        guard loop.acceptsNewResources, let (fd, ssl, bytes) = handoff.take() else { return nil }
        let transport: (any Transport)? = if let ssl {
            TLSTransport.adopting(loop: loop, fd: fd, ssl: ssl)
        } else {
            PlainTCPTransport.make(loop: loop, fd: fd, connecting: false)
        }
        guard let transport else { return nil }
        let connection = Connection(loop: loop, transport: transport, connecting: false)
        if !bytes.isEmpty {
            connection.decoder.feed(bytes)
            if connection.decoder.holdsPartialFrame {
                connection.partialFrameSinceMillis = Clocks.monotonicMilliseconds()
            }
        }
        install(connection)
        connection.startIO()
        // Deferred: the transport reports readable on a later pass (never from here), and
        // `readable()` takes the decoder's bytes before reading the socket.
        if connection.canDeliver, connection.decoder.bufferedByteCount >= FrameHeader.size {
            transport.triggerRead()
        }
        return connection
    }
}
