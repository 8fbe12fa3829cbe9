import CLibevent
import Glibc
import PushWire

/// Frame-level reading: whole frames are handed to the handler in place, straight out
/// of the bufferevent's input buffer.
///
/// For plain TCP the read is ours too: libevent 2.1's socket bufferevent asks the kernel
/// how much is waiting (an ioctl) before every read and then reads at most 4 KiB, so a
/// peer with 20 KiB of pipelined requests took five loop passes and ten syscalls. Our own
/// read event reads up to `readChunk` bytes with one readv into the same input buffer.
extension Connection {
    /// The most one read takes from the socket; level-triggered epoll brings us back for
    /// the rest.
    static let readChunk = 64 * 1024

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

    /// Our read event fired: one readv into the input buffer, then the frames.
    func socketReadable() {
        guard let bev, let input = bufferevent_get_input(bev) else { return }
        var extents = (iovec(), iovec())
        let read: Int = withUnsafeMutableBytes(of: &extents) { raw in
            guard let vectors = raw.baseAddress?.assumingMemoryBound(to: iovec.self) else { return -1 }
            // The bufferevent keeps the input frozen at the end (only it may add); this
            // read stands in for its own, as the output flush does for writes.
            evbuffer_unfreeze(input, 0)
            defer { evbuffer_freeze(input, 0) }
            let reserved = Int(evbuffer_reserve_space(input, Connection.readChunk, vectors, 2))
            guard reserved > 0 else {
                errno = ENOMEM
                return -1
            }
            // (On Linux libevent's evbuffer_iovec is the system's iovec.)
            let count = readv(bufferevent_getfd(bev), vectors, Int32(reserved))
            let code = errno
            var committed = 0
            var left = max(count, 0)
            while committed < reserved && left > 0 {
                vectors[committed].iov_len = min(left, vectors[committed].iov_len)
                left -= vectors[committed].iov_len
                committed += 1
            }
            evbuffer_commit_space(input, vectors, Int32(committed))
            errno = code
            return count
        }
        if read > 0 {
            readable()
        } else if read == 0 {
            event(sp_BEV_EVENT_READING | sp_BEV_EVENT_EOF)
        } else {
            let code = errno
            guard code != EAGAIN && code != EWOULDBLOCK && code != EINTR else { return }
            close(reason: .error(errno: code))
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
