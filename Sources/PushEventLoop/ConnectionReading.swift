import CLibevent
import Glibc
import PushWire

/// Frame-level reading: whole frames are handed to the handler in place, straight out
/// of the bufferevent's input buffer.
extension Connection {
    /// Called once the owner has had the chance to install a handler.
    func startIO() {
        state.insert(.readEnabled)
        updateReading()
        if !state.contains(.tls) { startDirectWrites() }
    }

    /// Stops delivering frames (and reading from the socket) until `resumeReading()`.
    public func pauseReading() {
        state.insert(.readPaused)
        updateReading()
    }

    public func resumeReading() {
        guard state.contains(.readPaused) else { return }
        state.remove(.readPaused)
        updateReading()
        // Whole frames may already sit in the input buffer; no new bytes will arrive
        // to announce them, so ask libevent for a (deferred, not re-entrant) read callback.
        if let bev, canDeliver, evbuffer_get_length(bufferevent_get_input(bev)) >= FrameHeader.size {
            bufferevent_trigger(bev, sp_EV_READ, Int32(BEV_TRIG_DEFER_CALLBACKS.rawValue))
        }
    }

    var canDeliver: Bool {
        state.isDisjoint(with: [.closed, .connecting, .readStopped, .readPaused]) && state.contains(.readEnabled)
    }

    func updateReading() {
        guard let bev else { return }
        if canDeliver {
            bufferevent_enable(bev, sp_EV_READ)
        } else {
            bufferevent_disable(bev, sp_EV_READ)
        }
    }

    func readable() {
        lastReadMillis = EventLoop.monotonicMilliseconds()
        guard let bev, let input = bufferevent_get_input(bev) else { return }
        while canDeliver {
            // Fast path: every whole frame inside the first contiguous chunk is parsed and
            // delivered in place, then all of them are drained with a single call.
            var extent = iovec()
            guard evbuffer_peek(input, -1, nil, &extent, 1) > 0 else { return }
            let chunk = UnsafeRawBufferPointer(start: extent.iov_base, count: extent.iov_len)
            var consumed = 0
            while canDeliver, chunk.count - consumed >= FrameHeader.size {
                let header: FrameHeader
                do throws(WireError) {
                    header = try FrameHeader.parse(
                        UnsafeRawBufferPointer(rebasing: chunk[consumed ..< consumed + FrameHeader.size]),
                        maxFrame: maxFrame)
                } catch {
                    if consumed > 0 { evbuffer_drain(input, consumed) }
                    framingError(error)
                    return
                }
                let frameLength = header.frameLength
                guard chunk.count - consumed >= frameLength else { break }
                let body = UnsafeRawBufferPointer(rebasing: chunk[consumed + FrameHeader.size ..< consumed + frameLength])
                handler?.onFrame(self, header: header, body: body)
                // The handler may have closed us, which freed the bufferevent and its buffers.
                if state.contains(.closed) { return }
                consumed += frameLength
            }
            if consumed > 0 {
                evbuffer_drain(input, consumed)
            } else if !deliverStraddlingFrame(input) {
                return
            }
        }
    }

    /// Slow path for a frame whose header or body spans two buffer chunks: copy the
    /// header out, and only once the whole frame is buffered make it contiguous.
    private func deliverStraddlingFrame(_ input: OpaquePointer) -> Bool {
        let available = evbuffer_get_length(input)
        guard available >= FrameHeader.size else { return false }
        var raw: (UInt64, UInt64) = (0, 0)
        evbuffer_copyout(input, &raw, FrameHeader.size)
        let limit = maxFrame
        let parsed = withUnsafeBytes(of: &raw) { bytes -> Result<FrameHeader, WireError> in
            do throws(WireError) {
                return .success(try FrameHeader.parse(bytes, maxFrame: limit))
            } catch {
                return .failure(error)
            }
        }
        let header: FrameHeader
        switch parsed {
        case .success(let value): header = value
        case .failure(let error):
            framingError(error)
            return false
        }
        let frameLength = header.frameLength
        guard available >= frameLength else { return false }
        guard let start = evbuffer_pullup(input, frameLength) else {
            close(reason: .error(errno: ENOMEM))
            return false
        }
        let body = UnsafeRawBufferPointer(start: start + FrameHeader.size, count: Int(header.bodyLength))
        handler?.onFrame(self, header: header, body: body)
        if state.contains(.closed) { return false }
        evbuffer_drain(input, frameLength)
        return true
    }

    func framingError(_ error: WireError) {
        state.insert(.readStopped)
        updateReading()
        if let handler {
            handler.onFramingError(self, error: error)
        } else {
            close(reason: .framingError(error))
        }
    }
}
