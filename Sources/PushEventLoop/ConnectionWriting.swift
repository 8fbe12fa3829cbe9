import CLibevent
import Glibc
import PushWire

/// Output: appends to the bufferevent's buffer, one write per connection per loop
/// iteration, the output cap, and close-after-flush.
///
/// For plain TCP the write is ours: the first `write` of an iteration queues the
/// connection on the loop, whose flush event runs after the iteration's I/O callbacks
/// and hands each queued buffer to the socket with one `writev`. Left to libevent, every
/// write would arm EPOLLOUT, wait a whole iteration for it and disarm it again: two
/// `epoll_ctl` and a loop pass per write. libevent's write event is armed only while the
/// kernel refuses bytes, and while someone waits for the output to drain (the cap,
/// close-after-flush), which its write callback reports. TLS keeps libevent's path:
/// OpenSSL owns that socket's writes.
extension Connection {
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
        if state.contains(.directWrites) && !flushQueued {
            flushQueued = true
            loop.queueFlush(self)
        }
        if evbuffer_get_length(output) > maxOutputBytes { return overCap() }
        return true
    }

    func startDirectWrites() {
        guard let bev else { return }
        state.insert(.directWrites)
        if evbuffer_get_length(bufferevent_get_output(bev)) > 0 && !flushQueued {
            // Queued while connecting: libevent's write event was meant to send it.
            flushQueued = true
            loop.queueFlush(self)
        }
        updateWriteEvent()
    }

    /// The loop's end-of-iteration flush.
    func flushOutput() {
        flushQueued = false
        guard let bev, state.contains(.directWrites) else { return }
        let output = bufferevent_get_output(bev)
        if evbuffer_get_length(output) > 0 {
            // A socket bufferevent keeps its output frozen at the front (only its own
            // write callback may drain it); the write below is that callback's stand-in.
            evbuffer_unfreeze(output, 1)
            let written = evbuffer_write(output, bufferevent_getfd(bev))
            let code = errno
            evbuffer_freeze(output, 1)
            if written < 0 && code != EAGAIN && code != EWOULDBLOCK && code != EINTR {
                close(reason: .error(errno: code))
                return
            }
        }
        updateWriteEvent()
        // libevent's write callback reports only the bytes it wrote itself.
        if !state.isDisjoint(with: [.overCap, .closingAfterFlush]) { drained() }
    }

    /// libevent's write event is wanted while bytes wait for a writable socket, or while
    /// the write callback must report draining; otherwise it would only cost epoll_ctl.
    func updateWriteEvent() {
        guard let bev, state.contains(.directWrites) else { return }
        let waiting = evbuffer_get_length(bufferevent_get_output(bev)) > 0
        if waiting || !state.isDisjoint(with: [.overCap, .closingAfterFlush]) {
            bufferevent_enable(bev, sp_EV_WRITE)
        } else {
            bufferevent_disable(bev, sp_EV_WRITE)
        }
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
    func updateWriteWatch() {
        guard let bev else { return }
        let context = Unmanaged.passUnretained(self).toOpaque()
        updateWriteEvent()
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

    func drained() {
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
}
