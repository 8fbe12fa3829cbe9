import PushEventLoop
import PushWire
import Testing

/// Server side of the framing tests: records frames and the framing error, and answers
/// the error the way the protocol layer will (a GOAWAY-like frame, then close after flush).
private final class FramingProbe: ConnectionHandler {
    var frames: [UInt32] = []
    var error: WireError?
    var bufferedAtError = -1
    var closeReason: CloseReason?

    func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) {
        frames.append(header.correlation)
        if header.correlation == 1 { connection.maxFrame = 1024 }
    }

    func onFramingError(_ connection: Connection, error: WireError) {
        self.error = error
        bufferedAtError = connection.inputBufferedBytes
        var goaway: [UInt8] = []
        FrameHeader(rawType: 0x7F, correlation: 0, status: error.status, bodyLength: 0).write(into: &goaway)
        connection.write(goaway)
        connection.closeAfterFlush(reason: .framingError(error))
    }

    func onClose(_ connection: Connection, reason: CloseReason) { closeReason = reason }
}

/// Client side: sends raw bytes, records what comes back until the server closes.
private final class RawPeer: ConnectionHandler {
    var frames: [FrameHeader] = []
    var closeReason: CloseReason?
    var done: () -> Void = {}

    func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) {
        frames.append(header)
    }

    func onClose(_ connection: Connection, reason: CloseReason) {
        closeReason = reason
        done()
    }
}

extension EventLoopSuite {
    /// Sends `bytes` to a FramingProbe server and runs until the server hangs up.
    private func exchange(_ bytes: [UInt8]) throws -> (FramingProbe, RawPeer) {
        let probe = FramingProbe()
        let peer = RawPeer()
        try withEventLoop { loop in
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { $0.handler = probe }
            peer.done = { loop.stop() }
            Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port) { result in
                guard case .success(let connection) = result else {
                    Issue.record("connect failed: \(result)")
                    loop.stop()
                    return
                }
                connection.handler = peer
                connection.write(bytes)
            }
            runLoop(loop, timeout: .seconds(5))
        }
        return (probe, peer)
    }

    @Test func badMagicStopsReadingWithMalformedFrame() throws {
        var bad = makeFrame(correlation: 2, body: [UInt8](repeating: 0xEE, count: 100))
        bad[0] = 0x00
        let (probe, peer) = try exchange(makeFrame(correlation: 7, body: [1, 2, 3]) + bad)
        // The valid frame before the garbage is still delivered; the garbage's body is not.
        #expect(probe.frames == [7])
        #expect(probe.error == .badMagic(0x00))
        #expect(probe.error?.status == .malformedFrame)
        #expect(probe.error?.isFatal == true)
        #expect(probe.closeReason == .framingError(.badMagic(0x00)))
        // The GOAWAY went out before the close.
        #expect(peer.frames.map(\.rawType) == [0x7F])
        #expect(peer.frames.first?.status == .malformedFrame)
        #expect(peer.closeReason == .peerClosed)
    }

    @Test func oversizedLengthIsRejectedFromTheHeaderAlone() throws {
        // Only a header announcing a 4 GiB body: the error must fire without a body byte.
        var header: [UInt8] = []
        FrameHeader(rawType: 0x42, correlation: 9, status: .ok, bodyLength: 0xFFFF_FFFF).write(into: &header)
        let (probe, peer) = try exchange(header)
        #expect(probe.frames.isEmpty)
        #expect(probe.error == .frameTooLarge(length: 0xFFFF_FFFF, max: FrameLimits.defaultMaxFrame))
        #expect(probe.error?.status == .frameTooLarge)
        // Nothing past the header was waited for (a plain-TCP read may not have copied
        // even the header into the connection's buffer: it parses from the read itself).
        #expect(probe.bufferedAtError <= FrameHeader.size)
        #expect(peer.frames.first?.status == .frameTooLarge)
        #expect(peer.closeReason == .peerClosed)
    }

    @Test func loweredMaxFrameAppliesFromTheNextHeader() throws {
        // Frame 1 makes the probe lower maxFrame to 1024; frame 2 (2000 bytes) is then too large.
        let stream = makeFrame(correlation: 1, body: [UInt8](repeating: 1, count: 1500))
            + makeFrame(correlation: 2, body: [UInt8](repeating: 2, count: 2000))
        let (probe, _) = try exchange(stream)
        #expect(probe.frames == [1])
        #expect(probe.error == .frameTooLarge(length: 2000, max: 1024))
    }

    @Test func badVersionAndReservedBitsAreFatal() throws {
        var badVersion = makeFrame(correlation: 3)
        badVersion[1] = 9
        let (versionProbe, _) = try exchange(badVersion)
        #expect(versionProbe.error == .unsupportedVersion(9))

        var reserved = makeFrame(correlation: 4)
        reserved[11] = 1
        let (reservedProbe, _) = try exchange(reserved)
        #expect(reservedProbe.error == .reservedBitsSet)
    }

    @Test func defaultFramingErrorHandlingClosesTheConnection() throws {
        try withEventLoop { loop in
            var serverReason: CloseReason?
            var clientReason: CloseReason?
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { connection in
                // Only onClose is set: the default framing-error behaviour is an immediate close.
                connection.callbacks.close = { _, reason in serverReason = reason }
            }
            Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port) { result in
                guard case .success(let connection) = result else { return }
                connection.callbacks.close = { _, reason in
                    clientReason = reason
                    loop.stop()
                }
                connection.write([UInt8](repeating: 0x55, count: 32))
            }
            runLoop(loop, timeout: .seconds(5))
            #expect(serverReason == .framingError(.badMagic(0x55)))
            #expect(clientReason == .peerClosed)
        }
    }
}
