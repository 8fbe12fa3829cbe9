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
    private(set) var fd: Int32
    private var readEvent: OpaquePointer?
    private var writeEvent: OpaquePointer?
    private var output: OpaquePointer?
    /// Queued for the loop's end-of-iteration flush.
    var flushQueued = false
    private var connecting: Bool
    private var readArmed = false
    private var writeArmed = false
    /// Close-after-flush's patience: restarted by every write that makes progress.
    private var writeTimeout: timeval?

    var isTLS: Bool { false }
    var readsAhead: Bool { false }
    var inputBufferedBytes: Int { 0 }
    var outputBufferedBytes: Int {
        guard let output else { return 0 }
        return evbuffer_get_length(output)
    }

    /// Takes ownership of `fd` (closed here if allocation fails, which returns nil).
    static func make(loop: EventLoop, fd: Int32, connecting: Bool) -> PlainTCPTransport? {
        let transport = PlainTCPTransport(loop: loop, fd: fd, connecting: connecting)
        let context = Unmanaged.passUnretained(transport).toOpaque()
        transport.output = evbuffer_new()
        transport.readEvent = event_new(loop.base, fd, sp_EV_READ | sp_EV_PERSIST, plainReadCallback, context)
        transport.writeEvent = event_new(loop.base, fd, sp_EV_WRITE | sp_EV_PERSIST, plainWriteCallback, context)
        guard transport.output != nil, transport.readEvent != nil, transport.writeEvent != nil else {
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
        updateWriteEvent()
        return 0
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
        guard output != nil, !connecting else { return }
        writeOut()
    }

    /// One `writev` of as much as is queued, then the write event as the rest requires.
    private func writeOut() {
        guard let output, let owner else { return }
        if evbuffer_get_length(output) > 0 {
            let written = evbuffer_write(output, fd)
            let code = errno
            if written < 0 && code != EAGAIN && code != EWOULDBLOCK && code != EINTR {
                owner.transportFailed(.error(errno: code))
                return
            }
        }
        updateWriteEvent()
        if owner.isWatchingOutput { owner.outputWritten() }
    }

    func watchOutput(lowWater: Int?, timeout: Duration?) {
        // The owner checks its low-water mark itself after each write.
        writeTimeout = timeout.map { timeval($0) }
        updateWriteEvent()
    }

    private func updateWriteEvent() {
        guard let writeEvent else { return }
        let wanted = connecting || outputBufferedBytes > 0
        if wanted, var timeout = writeTimeout {
            // Re-adding restarts the countdown: the peer made progress.
            event_add(writeEvent, &timeout)
        } else if wanted, !writeArmed {
            event_add(writeEvent, nil)
        } else if !wanted, writeArmed {
            event_del(writeEvent)
        }
        writeArmed = wanted
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
        updateWriteEvent()
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
