import CLibevent
import Glibc
import PushWire

/// Output: appends to the bufferevent's buffer (libevent flushes once per iteration),
/// the output cap, and close-after-flush.
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
        if evbuffer_get_length(output) > maxOutputBytes { return overCap() }
        return true
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
