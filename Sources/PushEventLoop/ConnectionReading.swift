import CLibevent
import Glibc
import PushWire

/// Frame-level reading: whole frames are handed to the handler in place, with no copy
/// and no allocation.
///
/// For plain TCP the read is ours: libevent 2.1's socket bufferevent asks the kernel how
/// much is waiting (an ioctl) before every read and then reads at most 4 KiB, so a peer
/// with 20 KiB of pipelined requests took five loop passes and ten syscalls. Our read
/// event takes up to 64 KiB at once into the loop's scratch buffer and delivers the
/// frames from there; only an incomplete frame at the end is copied into the
/// connection's own input buffer, so an idle connection holds no read buffer at all,
/// and a peer that sends a partial frame makes us hold that much, not 64 KiB.
/// TLS connections read through the bufferevent (OpenSSL owns the socket).
extension Connection {
    /// Called once the owner has had the chance to install a handler.
    func startIO() {
        state.insert(.readEnabled)
        if !state.contains(.tls), let bev {
            let context = Unmanaged.passUnretained(self).toOpaque()
            readEvent = event_new(loop.base, bufferevent_getfd(bev), sp_EV_READ | sp_EV_PERSIST, connectionSocketReadCallback, context)
            startDirectWrites()
        }
        updateReading()
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
        if let readEvent {
            if canDeliver { event_add(readEvent, nil) } else { event_del(readEvent) }
        } else if canDeliver {
            bufferevent_enable(bev, sp_EV_READ)
        } else {
            bufferevent_disable(bev, sp_EV_READ)
        }
    }

    /// Our read event fired: one read into the loop's scratch buffer, then the frames.
    func socketReadable() {
        guard let bev, let input = bufferevent_get_input(bev) else { return }
        let scratch = loop.readScratch
        let count = Glibc.read(bufferevent_getfd(bev), scratch.baseAddress, scratch.count)
        if count > 0 {
            let received = UnsafeRawBufferPointer(rebasing: scratch[..<count])
            guard evbuffer_get_length(input) == 0 else {
                // Behind an incomplete frame: queue up behind it.
                if appendToInput(input, received) { readable() }
                return
            }
            lastReadMillis = EventLoop.monotonicMilliseconds()
            let (consumed, error) = deliverFrames(in: received)
            if state.contains(.closed) { return }
            if let error {
                framingError(error)
            } else if consumed < count {
                // An incomplete frame, or frames held back by pauseReading().
                _ = appendToInput(input, UnsafeRawBufferPointer(rebasing: received[consumed...]))
            }
        } else if count == 0 {
            event(sp_BEV_EVENT_READING | sp_BEV_EVENT_EOF)
        } else {
            let code = errno
            guard code != EAGAIN && code != EWOULDBLOCK && code != EINTR else { return }
            close(reason: .error(errno: code))
        }
    }

    private func appendToInput(_ input: OpaquePointer, _ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return true }
        // The bufferevent keeps its input frozen at the end (only it may add); this
        // read stands in for its own, as the output flush does for writes.
        evbuffer_unfreeze(input, 0)
        let added = evbuffer_add(input, base, bytes.count) == 0
        evbuffer_freeze(input, 0)
        if !added { close(reason: .error(errno: ENOMEM)) }
        return added
    }

    func readable() {
        lastReadMillis = EventLoop.monotonicMilliseconds()
        guard let bev, let input = bufferevent_get_input(bev) else { return }
        while canDeliver {
            // Fast path: every whole frame inside the first contiguous chunk is parsed and
            // delivered in place, then all of them are drained with a single call.
            var extent = iovec()
            guard evbuffer_peek(input, -1, nil, &extent, 1) > 0 else { return }
            let (consumed, error) = deliverFrames(in: UnsafeRawBufferPointer(start: extent.iov_base, count: extent.iov_len))
            // The handler may have closed us, which freed the bufferevent and its buffers.
            if state.contains(.closed) { return }
            if consumed > 0 { evbuffer_drain(input, consumed) }
            if let error {
                framingError(error)
                return
            }
            if consumed == 0 && !deliverStraddlingFrame(input) { return }
        }
    }

    /// Hands the whole frames at the start of `bytes` to the handler, in place, while
    /// delivery is allowed. Returns the bytes those frames took, and the framing error
    /// that stopped it, if one did.
    private func deliverFrames(in bytes: UnsafeRawBufferPointer) -> (consumed: Int, error: WireError?) {
        var consumed = 0
        while canDeliver, bytes.count - consumed >= FrameHeader.size {
            let header: FrameHeader
            do throws(WireError) {
                header = try FrameHeader.parse(
                    UnsafeRawBufferPointer(rebasing: bytes[consumed ..< consumed + FrameHeader.size]), maxFrame: maxFrame)
            } catch {
                return (consumed, error)
            }
            let frameLength = header.frameLength
            guard bytes.count - consumed >= frameLength else { break }
            handler?.onFrame(self, header: header,
                             body: UnsafeRawBufferPointer(rebasing: bytes[consumed + FrameHeader.size ..< consumed + frameLength]))
            consumed += frameLength
            if state.contains(.closed) { break }
        }
        return (consumed, nil)
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
