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
/// socket at once. Small writes with nothing else queued (a 34-byte ack, a push) are
/// staged in one of the loop's slots (see `EventLoop.takeStagingSlot`) and sent with one
/// `send`: an evbuffer would allocate a chunk per write and free it again. Only bytes
/// the kernel refuses, writes that outgrow the slot, and writes while connecting go to
/// an evbuffer (staged bytes first, so the order holds). Left to a bufferevent, every write would arm EPOLLOUT, wait a whole
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
    /// The next transport on the loop's flush list (see `EventLoop.queueFlush`).
    var nextToFlush: Unmanaged<PlainTCPTransport>?
    /// Close-after-flush's patience in microseconds (-1: none): restarted by every
    /// write that makes progress.
    private var writeTimeoutMicros: Int64 = -1
    // The 4-, 2- and 1-byte fields last, sharing a word (one transport per connection).
    private(set) var fd: Int32
    /// The loop's staging slot holding this transport's small writes (-1: none), and
    /// how many bytes it holds. Only while `output` is nil: staged bytes come first.
    private var stagedSlot: Int16 = -1
    private var stagedCount: UInt16 = 0
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
    var holdsStagedBytes: Bool { stagedSlot >= 0 }
    var outputBufferedBytes: Int {
        guard let output else { return Int(stagedCount) }
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
        if outputBufferedBytes > 0 && !flushQueued { queueFlush() }
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
        let count = bytes.count
        if output == nil && !connecting {
            guard let base = bytes.baseAddress, count > 0 else { return Int(stagedCount) }
            if stagedSlot >= 0 {
                let staged = Int(stagedCount)
                if staged + count <= EventLoop.stagingSlotSize {
                    (loop.stagingSlot(Int(stagedSlot)) + staged).copyMemory(from: base, byteCount: count)
                    stagedCount = UInt16(staged + count)
                    return staged + count
                }
                // Outgrows the slot: on to an evbuffer, the staged bytes first.
            } else if count <= EventLoop.stagingSlotSize, let slot = loop.takeStagingSlot(for: self) {
                loop.stagingSlot(slot).copyMemory(from: base, byteCount: count)
                stagedSlot = Int16(slot)
                stagedCount = UInt16(count)
                if !flushQueued { queueFlush() }
                return count
            }
        }
        if output == nil {
            guard !bytes.isEmpty || stagedSlot >= 0 else { return 0 }
            output = evbuffer_new()
            guard output != nil else { return -1 }
            if !moveStagedToOutput() { return -1 }
        }
        guard let output else { return -1 }
        if let base = bytes.baseAddress, bytes.count > 0, evbuffer_add(output, base, bytes.count) != 0 { return -1 }
        if !flushQueued && !connecting { queueFlush() }
        return evbuffer_get_length(output)
    }

    /// Appends the staged bytes to `output` and gives the slot back; false if `output`
    /// does not exist or cannot grow.
    private func moveStagedToOutput() -> Bool {
        guard stagedSlot >= 0 else { return true }
        guard let output else { return false }
        if evbuffer_add(output, loop.stagingSlot(Int(stagedSlot)), Int(stagedCount)) != 0 { return false }
        releaseStagedSlot()
        return true
    }

    private func releaseStagedSlot() {
        loop.releaseStagingSlot(Int(stagedSlot))
        stagedSlot = -1
        stagedCount = 0
    }

    /// One `send` of the staged bytes. What the kernel refuses moves to `output`, for the
    /// write event (or, when `early`, for the end-of-turn flush). Returns the errno of a
    /// failure that ends the connection (never when `early`: no owner may be called then;
    /// the flush meets the error again), else 0.
    @discardableResult
    func sendStaged(early: Bool) -> Int32 {
        guard stagedSlot >= 0, fd >= 0 else { return 0 }
        let start = loop.stagingSlot(Int(stagedSlot))
        let count = Int(stagedCount)
        let sent = Glibc.send(fd, start, count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
        if sent == count {
            releaseStagedSlot()
            return 0
        }
        if sent < 0 {
            let code = errno
            if code != EAGAIN && code != EWOULDBLOCK && code != EINTR && !early {
                releaseStagedSlot()
                return code
            }
        }
        let done = max(sent, 0)
        if done > 0 {
            start.copyMemory(from: start + done, byteCount: count - done)
            stagedCount = UInt16(count - done)
        }
        // The rest waits in an evbuffer; if none can be made, it stays staged (the slot
        // stays taken) and the flush fails the connection.
        output = output ?? evbuffer_new()
        if moveStagedToOutput() { return 0 }
        if let output, evbuffer_get_length(output) == 0 {
            evbuffer_free(output)
            self.output = nil
        }
        return early ? 0 : ENOMEM
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

    /// One `send` of the staged bytes or one `writev` of as much as is queued, then the
    /// write event as the rest requires.
    private func writeOut() {
        guard let owner else { return }
        if stagedSlot >= 0 {
            // `output` is nil while bytes are staged (they would be in it otherwise).
            let code = sendStaged(early: false)
            if code != 0 {
                owner.transportFailed(.error(errno: code))
                return
            }
        } else if let output {
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
        if let timeout {
            let value = timeval(timeout)
            writeTimeoutMicros = Int64(value.tv_sec) * 1_000_000 + Int64(value.tv_usec)
        } else {
            writeTimeoutMicros = -1
        }
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
        if writeTimeoutMicros >= 0 {
            var timeout = timeval(tv_sec: Int(writeTimeoutMicros / 1_000_000), tv_usec: Int(writeTimeoutMicros % 1_000_000))
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
        Glibc.close(releaseEvents())
    }

    func detach() -> DetachedSocket? {
        guard fd >= 0, !connecting, outputBufferedBytes == 0 else { return nil }
        // The events' EPOLL_CTL_DEL waits for this loop's next pass (changelist): it finds
        // the socket open, or, if its new owner closed it already, the kernel has dropped
        // it from this loop's epoll set itself (no other descriptor shares the socket).
        return DetachedSocket(fd: releaseEvents(), ssl: nil, input: [])
    }

    /// Frees the events and buffers; the socket, which the transport no longer holds.
    private func releaseEvents() -> Int32 {
        // Safe inside an event's own callback: libevent copies what it needs first.
        if let readEvent { event_free(readEvent) }
        if let writeEvent { event_free(writeEvent) }
        if let output { evbuffer_free(output) }
        if stagedSlot >= 0 { releaseStagedSlot() }
        readEvent = nil
        writeEvent = nil
        output = nil
        readArmed = false
        let socket = fd
        fd = -1
        return socket
    }
}

private func plainReadCallback(_ fd: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    // The owner keeps the transport alive, so holding the owner for the whole callback
    // is enough: the transport itself is not retained (one retain/release pair less per
    // read).
    Unmanaged<PlainTCPTransport>.fromOpaque(context)._withUnsafeGuaranteedRef { transport in
        guard let owner = transport.owner else { return }
        withExtendedLifetime(owner) { transport.readable() }
    }
}

private func plainWriteCallback(_ fd: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let transport = Unmanaged<PlainTCPTransport>.fromOpaque(context).takeUnretainedValue()
    guard let owner = transport.owner else { return }
    withExtendedLifetime(owner) { transport.writable(what) }
}
