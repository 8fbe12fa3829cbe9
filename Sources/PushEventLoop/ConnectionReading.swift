import CLibevent
import Glibc
import PushWire

/// Frame-level reading: every byte read goes through the connection's `FrameDecoder`,
/// which hands whole frames to the handler in place, with no copy and no allocation.
///
/// For plain TCP the read is ours: libevent 2.1's socket bufferevent asks the kernel how
/// much is waiting (an ioctl) before every read and then reads at most 4 KiB, so a peer
/// with 20 KiB of pipelined requests took five loop passes and ten syscalls. Our read
/// event takes up to 64 KiB at once into the loop's scratch buffer and the decoder
/// delivers the frames from there; only an incomplete frame at the end is copied into
/// the decoder's own buffer, so an idle connection holds no read buffer at all, and a
/// peer that sends a partial frame makes us hold that much, not 64 KiB.
/// TLS connections read through the bufferevent (OpenSSL owns the socket); its input is
/// moved into the same scratch buffer and goes through the same decoder.
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
        // Whole frames may already be buffered; no new bytes will arrive to announce
        // them, so ask libevent for a (deferred, not re-entrant) read callback.
        guard canDeliver, let bev else { return }
        if let readEvent {
            if decoder.bufferedByteCount >= FrameHeader.size { event_active(readEvent, Int32(sp_EV_READ), 0) }
        } else if decoder.bufferedByteCount >= FrameHeader.size || evbuffer_get_length(bufferevent_get_input(bev)) > 0 {
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

    /// Plain TCP, our read event fired: frames held back by a pause first, then one read
    /// into the loop's scratch buffer.
    func socketReadable() {
        guard let bev else { return }
        if decoder.bufferedByteCount >= FrameHeader.size {
            received(UnsafeRawBufferPointer(start: nil, count: 0))
        }
        guard canDeliver else { return }
        let scratch = loop.readScratch
        let count = Glibc.read(bufferevent_getfd(bev), scratch.baseAddress, scratch.count)
        if count > 0 {
            lastReadMillis = EventLoop.monotonicMilliseconds()
            received(UnsafeRawBufferPointer(rebasing: scratch[..<count]))
        } else if count == 0 {
            event(sp_BEV_EVENT_READING | sp_BEV_EVENT_EOF)
        } else {
            let code = errno
            guard code != EAGAIN && code != EWOULDBLOCK && code != EINTR else { return }
            close(reason: .error(errno: code))
        }
    }

    /// TLS, the bufferevent's read callback: its input, one scratch-full at a time.
    func readable() {
        lastReadMillis = EventLoop.monotonicMilliseconds()
        if decoder.bufferedByteCount >= FrameHeader.size {
            received(UnsafeRawBufferPointer(start: nil, count: 0))
        }
        let scratch = loop.readScratch
        while canDeliver, let bev {
            let count = evbuffer_remove(bufferevent_get_input(bev), scratch.baseAddress, scratch.count)
            guard count > 0 else { return }
            received(UnsafeRawBufferPointer(rebasing: scratch[..<Int(count)]))
        }
    }

    /// Runs `bytes` through the decoder, handing each whole frame to the handler while
    /// delivery is allowed.
    func received(_ bytes: UnsafeRawBufferPointer) {
        var delivered = false
        do throws(WireError) {
            try decoder.decode(bytes, maxFrame: maxFrame) { header, body in
                delivered = true
                handler?.onFrame(self, header: header, body: body)
                return canDeliver
            }
        } catch {
            if !state.contains(.closed) { framingError(error) }
            return
        }
        if state.contains(.closed) {
            decoder.discardBuffered()
        } else if decoder.bufferedByteCount == 0 {
            partialFrameSinceMillis = nil
        } else if partialFrameSinceMillis == nil || delivered {
            // A frame that completed restarts the clock: a peer streaming big frames fast
            // ends most reads mid-frame, but never keeps one frame waiting.
            partialFrameSinceMillis = decoder.holdsPartialFrame ? EventLoop.monotonicMilliseconds() : nil
        }
    }

    func framingError(_ error: WireError) {
        partialFrameSinceMillis = nil
        state.insert(.readStopped)
        updateReading()
        if let handler {
            handler.onFramingError(self, error: error)
        } else {
            close(reason: .framingError(error))
        }
    }
}
