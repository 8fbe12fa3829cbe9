import PushClock
import PushWire

/// Frame-level reading: every byte read goes through the connection's `FrameDecoder`,
/// which hands whole frames to the handler in place, with no copy and no allocation.
///
/// The transport reads into the loop's 64 KiB scratch buffer (plain TCP straight from
/// the socket, TLS out of the bufferevent's input) and the decoder delivers the frames
/// from there; only an incomplete frame at the end (or what follows a pause) is copied
/// into the decoder's own buffer, so an idle connection holds no read buffer at all, and
/// a peer that sends a partial frame makes us hold that much, not 64 KiB.
extension Connection {
    /// Called once the owner has had the chance to install a handler.
    func startIO() {
        if phase == .starting { phase = .open }
        transport.startIO()
        updateReading()
    }

    /// Stops delivering frames (and reading from the socket) until `resumeReading()`.
    public func pauseReading() {
        flags.insert(.readPaused)
        updateReading()
    }

    public func resumeReading() {
        guard flags.contains(.readPaused) else { return }
        flags.remove(.readPaused)
        updateReading()
        // Whole frames may already be buffered; no new bytes will arrive to announce
        // them, so ask for a (deferred, not re-entrant) read report.
        if canDeliver, decoder.bufferedByteCount >= FrameHeader.size || transport.inputBufferedBytes > 0 {
            transport.triggerRead()
        }
    }

    var canDeliver: Bool {
        phase == .open && flags.isDisjoint(with: [.readPaused, .readStopped])
    }

    func updateReading() {
        guard phase != .closed else { return }
        transport.setReading(canDeliver)
    }

    /// The transport has input (or a resume asked to be called back): frames held back
    /// by a pause first, then reads into the loop's scratch buffer while delivery is
    /// allowed.
    func readable() {
        if decoder.bufferedByteCount >= FrameHeader.size, canDeliver {
            received(UnsafeRawBufferPointer(start: nil, count: 0))
        }
        let scratch = loop.readScratch
        while canDeliver {
            switch transport.read(into: scratch) {
            case .bytes(let count):
                lastReadMillis = Clocks.monotonicMilliseconds()
                received(UnsafeRawBufferPointer(rebasing: scratch[..<count]))
                if count < scratch.count || !transport.readsAhead { return }
            case .wouldBlock:
                return
            case .end:
                inputEnded()
                return
            case .failed(let code):
                transportFailed(.error(errno: code))
                return
            }
        }
    }

    /// Runs `bytes` through the decoder, handing each whole frame to the handler while
    /// delivery is allowed.
    func received(_ bytes: UnsafeRawBufferPointer) {
        guard isFramed else {
            if !bytes.isEmpty { handler?.onBytes(self, bytes: bytes) }
            return
        }
        var delivered = false
        do throws(WireError) {
            try decoder.decode(bytes, maxFrame: maxFrame) { header, body in
                delivered = true
                handler?.onFrame(self, header: header, body: body)
                return canDeliver
            }
        } catch {
            if phase != .closed { framingError(error) }
            return
        }
        if phase == .closed {
            decoder.discardBuffered()
        } else if decoder.bufferedByteCount == 0 {
            partialFrameSinceMillis = nil
        } else if partialFrameSinceMillis == nil || delivered {
            // A frame that completed restarts the clock: a peer streaming big frames fast
            // ends most reads mid-frame, but never keeps one frame waiting.
            partialFrameSinceMillis = decoder.holdsPartialFrame ? Clocks.monotonicMilliseconds() : nil
        }
    }

    func framingError(_ error: WireError) {
        partialFrameSinceMillis = nil
        flags.insert(.readStopped)
        updateReading()
        if let handler {
            handler.onFramingError(self, error: error)
        } else {
            close(reason: .framingError(error))
        }
    }
}
