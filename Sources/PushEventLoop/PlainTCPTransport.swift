import CLibevent
import Glibc

/// Plain TCP with no bufferevent: a read event of our own, an output evbuffer written
/// with one `writev` per iteration, and a write event armed only while needed.
///
/// Reads: libevent 2.1's socket bufferevent asks the kernel how much is waiting (an
/// ioctl) before every read and then reads at most 4 KiB, so a peer with 20 KiB of
/// pipelined requests took five loop passes and ten syscalls. One read here takes up to
/// the loop's 64 KiB scratch buffer.
///
/// Writes: the first write of an iteration queues the transport on the loop, whose
/// flush event runs after the iteration's I/O callbacks and hands the whole buffer to the
/// socket at once. Left to a bufferevent, every write would arm EPOLLOUT, wait a whole
/// iteration for it and disarm it again: two `epoll_ctl` and a loop pass per write. The
/// write event is armed only while connecting and while the kernel refuses bytes.
final class PlainTCPTransport: Transport {
    unowned(unsafe) var owner: Connection?
    let loop: EventLoop
    private var readEvent: OpaquePointer?
    /// Only while armed (see the type's comment).
    private var writeEvent: OpaquePointer?
    /// Only while output is queued (see the type's comment).
    private var output: OpaquePointer?
    /// Close-after-flush's patience: restarted by every write that makes progress.
    private var writeTimeout: timeval?
    // The 4- and 1-byte fields last, sharing a word (one transport per connection).
    private(set) var fd: Int32
    /// Queued for the loop's end-of-iteration flush.
    var flushQueued = false
    private var connecting: Bool
    private var readArmed = false

    var isTLS: Bool { false }
    var readsAhead: Bool { false }
    var inputBufferedBytes: Int { 0 }
    /// Whether the output buffer and the write event exist right now (for tests).
    var holdsOutputBuffer: Bool { output != nil }
    var holdsWriteEvent: Bool { writeEvent != nil }
    var outputBufferedBytes: Int {
        guard let output else { return 0 }
        return evbuffer_get_length(output)
    }

    /// Takes ownership of `fd` (closed here if allocation fails, which returns nil).
    static func make(loop: EventLoop, fd: Int32, connecting: Bool) -> PlainTCPTransport? {
        let transport = PlainTCPTransport(loop: loop, fd: fd, connecting: connecting)
        let context = Unmanaged.passUnretained(transport).toOpaque()
        transport.readEvent = event_new(loop.base, fd, sp_EV_READ | sp_EV_PERSIST, plainReadCallback, context)
        guard transport.readEvent != nil else {
            transport.close(clean: false)
            return nil
        }
        return transport
    }

    private init(loop: EventLoop, fd: Int32, connecting: Bool) {
        self.loop = loop
        self.fd = fd
        self.connecting = connecting
    }

    deinit { close(clean: false) }

    func connect(to address: SocketAddress) -> Int32 {
        let result = address.withSockAddr { Glibc.connect(fd, $0, $1) }
        let code = errno
        guard result == 0 || code == EINPROGRESS else { return code == 0 ? EIO : code }
        // Even an immediate success is reported from the write event, on a later pass.
        return updateWriteEvent() ? 0 : ENOMEM
    }

    func startIO() {
        if outputBufferedBytes > 0 { queueFlush() }
    }

    func setReading(_ enabled: Bool) {
        guard enabled != readArmed, let readEvent else { return }
        readArmed = enabled
        if enabled { event_add(readEvent, nil) } else { event_del(readEvent) }
    }

    func triggerRead() {
        // An active event runs once on this or the next pass; never re-entrantly.
        if let readEvent { event_active(readEvent, Int32(sp_EV_READ), 0) }
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> ReadResult {
        let count = Glibc.read(fd, buffer.baseAddress, buffer.count)
        if count > 0 { return .bytes(count) }
        if count == 0 { return .end }
        let code = errno
        return code == EAGAIN || code == EWOULDBLOCK || code == EINTR ? .wouldBlock : .failed(errno: code)
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard fd >= 0 else { return -1 }
        if output == nil {
            guard !bytes.isEmpty else { return 0 }
            output = evbuffer_new()
        }
        guard let output else { return -1 }
        if let base = bytes.baseAddress, bytes.count > 0, evbuffer_add(output, base, bytes.count) != 0 { return -1 }
        if !flushQueued && !connecting { queueFlush() }
        return evbuffer_get_length(output)
    }

    private func queueFlush() {
        flushQueued = true
        loop.queueFlush(self)
    }

    /// The loop's end-of-iteration flush.
    func flush() {
        flushQueued = false
        // Closed since it was queued (the owner may be gone), or not connected yet.
        guard fd >= 0, !connecting else { return }
        writeOut()
    }

    /// One `writev` of as much as is queued, then the write event as the rest requires.
    private func writeOut() {
        guard let owner else { return }
        if let output {
            let written = evbuffer_write(output, fd)
            let code = errno
            if written < 0 && code != EAGAIN && code != EWOULDBLOCK && code != EINTR {
                owner.transportFailed(.error(errno: code))
                return
            }
            // Drained: an idle connection keeps no output buffer (the chains are gone
            // already; this is the evbuffer itself). The next write makes a new one.
            if evbuffer_get_length(output) == 0 {
                evbuffer_free(output)
                self.output = nil
            }
        }
        guard updateWriteEvent() else {
            owner.transportFailed(.error(errno: ENOMEM))
            return
        }
        if owner.isWatchingOutput { owner.outputWritten() }
    }

    func watchOutput(lowWater: Int?, timeout: Duration?) {
        // The owner checks its low-water mark itself after each write.
        writeTimeout = timeout.map { timeval($0) }
        if !updateWriteEvent() { owner?.transportFailed(.error(errno: ENOMEM)) }
    }

    /// Arms the write event while it is wanted (making it first) and frees it when it is
    /// not. False if it could not be made.
    private func updateWriteEvent() -> Bool {
        guard fd >= 0 else { return true }
        let wanted = connecting || outputBufferedBytes > 0
        guard wanted else {
            // Safe inside the event's own callback, as in `close`.
            if let writeEvent { event_free(writeEvent) }
            writeEvent = nil
            return true
        }
        let armed = writeEvent != nil
        if writeEvent == nil {
            let context = Unmanaged.passUnretained(self).toOpaque()
            writeEvent = event_new(loop.base, fd, sp_EV_WRITE | sp_EV_PERSIST, plainWriteCallback, context)
        }
        guard let writeEvent else { return false }
        if var timeout = writeTimeout {
            // Re-adding restarts the countdown: the peer made progress.
            event_add(writeEvent, &timeout)
        } else if !armed {
            event_add(writeEvent, nil)
        }
        return true
    }

    fileprivate func writable(_ what: Int16) {
        guard let owner else { return }
        if what & sp_EV_TIMEOUT != 0 {
            owner.flushTimedOut()
        } else if connecting {
            finishConnect(owner)
        } else {
            writeOut()
        }
    }

    private func finishConnect(_ owner: Connection) {
        var code: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        if getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &length) != 0 { code = errno }
        guard code == 0 else {
            owner.connectFailed(code == ECONNREFUSED ? .refused : .system(errno: code))
            return
        }
        connecting = false
        guard updateWriteEvent() else {
            owner.connectFailed(.system(errno: ENOMEM))
            return
        }
        if outputBufferedBytes > 0 && !flushQueued { queueFlush() }
        owner.transportConnected()
    }

    fileprivate func readable() {
        owner?.readable()
    }

    func close(clean: Bool) {
        guard fd >= 0 else { return }
        // Safe inside an event's own callback: libevent copies what it needs first.
        if let readEvent { event_free(readEvent) }
        if let writeEvent { event_free(writeEvent) }
        if let output { evbuffer_free(output) }
        readEvent = nil
        writeEvent = nil
        output = nil
        Glibc.close(fd)
        fd = -1
    }
}

private func plainReadCallback(_ fd: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let transport = Unmanaged<PlainTCPTransport>.fromOpaque(context).takeUnretainedValue()
    // The owner keeps the transport alive; hold the owner for the whole callback.
    guard let owner = transport.owner else { return }
    withExtendedLifetime(owner) { transport.readable() }
}

private func plainWriteCallback(_ fd: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let transport = Unmanaged<PlainTCPTransport>.fromOpaque(context).takeUnretainedValue()
    guard let owner = transport.owner else { return }
    withExtendedLifetime(owner) { transport.writable(what) }
}
