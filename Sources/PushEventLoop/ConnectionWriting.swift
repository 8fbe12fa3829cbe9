import Glibc

/// Output: queued on the transport (which writes it once per loop iteration, see
/// PlainTCPTransport), the output cap with its back-pressure report, and
/// close-after-flush.
extension Connection {
    /// Queues bytes for the peer. Returns false if the connection is closed, closing,
    /// being handed off, or was just cut off for going over `maxOutputBytes`.
    @discardableResult
    public func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard phase.rawValue <= Phase.open.rawValue else { return false }
        let queued = transport.write(bytes)
        if queued < 0 {
            close(reason: .error(errno: ENOMEM))
            return false
        }
        if queued > maxOutputBytes { return overCap() }
        return true
    }

    @discardableResult
    public func write(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { write($0) }
    }

    /// Stops reading, lets queued output (a GOAWAY, say) reach the peer, then closes
    /// with `reason`. With a `timeout`, gives up (`.flushTimeout`) if the peer makes no
    /// progress reading for that long.
    public func closeAfterFlush(reason: CloseReason = .local, timeout: Duration? = nil) {
        guard phase.rawValue < Phase.closingAfterFlush.rawValue else { return }
        let wasConnecting = phase == .connecting
        phase = .closingAfterFlush
        updateReading()
        guard transport.outputBufferedBytes > 0, !wasConnecting else {
            close(reason: reason)
            return
        }
        pendingCloseReason = reason
        closeTimeout = timeout
        updateOutputWatch()
    }

    private func overCap() -> Bool {
        let action = handler?.onBackpressure(self) ?? .close
        guard isOpen else { return false }
        switch action {
        case .close:
            close(reason: .slowConsumer)
            return false
        case .keepOpen:
            if !flags.contains(.overCap) {
                flags.insert(.overCap)
                updateOutputWatch()
            }
            return true
        }
    }

    /// Whether the transport must report written output: someone waits for it to drain.
    var isWatchingOutput: Bool {
        phase == .closingAfterFlush || flags.contains(.overCap)
    }

    func updateOutputWatch() {
        if phase == .closingAfterFlush {
            transport.watchOutput(lowWater: 0, timeout: closeTimeout)
        } else if flags.contains(.overCap) {
            transport.watchOutput(lowWater: maxOutputBytes / 2, timeout: nil)
        } else {
            transport.watchOutput(lowWater: nil, timeout: nil)
        }
    }

    /// The transport wrote some output while `isWatchingOutput`.
    func outputWritten() {
        guard phase != .closed else { return }
        let queued = transport.outputBufferedBytes
        if phase == .closingAfterFlush {
            if queued == 0 { close(reason: pendingCloseReason ?? .local) }
            return
        }
        if flags.contains(.overCap), queued <= maxOutputBytes / 2 {
            flags.remove(.overCap)
            updateOutputWatch()
            handler?.onOutputDrained(self)
        }
    }
}
