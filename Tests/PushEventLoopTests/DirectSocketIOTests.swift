import Glibc
import PushEventLoop
import PushWire
import PushTestSupport
import Testing

/// A plain blocking client socket on 127.0.0.1, for watching exactly what a server's
/// writes put on the wire and when.
final class RawClient {
    private(set) var fd: Int32

    init(port: Int) throws {
        fd = try LoopbackSocket.connect(port: port)
    }

    deinit { if fd >= 0 { close(fd) } }

    /// What the kernel holds for us right now, without waiting.
    func readAvailable() -> [UInt8] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if count <= 0 { return received }
            received += buffer[0..<count]
        }
    }

    /// Blocking: the whole of `bytes` (small enough for the socket buffers).
    func send(_ bytes: some Collection<UInt8>) {
        let array = Array(bytes)
        #expect(write(fd, array, array.count) == array.count)
    }

    /// Closes with a reset (RST) instead of a FIN.
    func reset() {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        close(fd)
        fd = -1
    }
}

/// Records the frames it is given and how its connection ended.
final class ClosingRecorder: ConnectionHandler {
    var reason: CloseReason?
    var correlations: [UInt32] = []
    func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) {
        correlations.append(header.correlation)
    }
    func onClose(_ connection: Connection, reason: CloseReason) { self.reason = reason }
}

/// A listener, a raw client connected to it, and the accepted server side of that
/// connection (set up by `configure` inside the accept callback).
struct AcceptedConnection {
    let listener: Listener
    let client: RawClient
    let server: Connection
    let recorder: ClosingRecorder

    init(on loop: EventLoop, configure: @escaping (Connection) -> Void = { _ in }) throws {
        let recorder = ClosingRecorder()
        var accepted: Connection?
        listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { connection in
            connection.handler = recorder
            configure(connection)
            accepted = connection
        }
        client = try RawClient(port: listener.port)
        for _ in 0..<200 where accepted == nil { loop.runOnce(blocking: true) }
        guard let accepted else { throw EventLoopError.libevent("the test connection was not accepted") }
        server = accepted
        self.recorder = recorder
    }
}

extension EventLoopSuite {
    /// Output written during an iteration is in the peer's socket when that iteration
    /// ends, not one iteration later when a write event would have fired; here the writes
    /// are made in the accept callback, before direct writing starts.
    @Test func writesReachThePeerByTheEndOfTheirIteration() throws {
        try withEventLoop { loop in
            var frames: [UInt8] = []
            for correlation in UInt32(1)...3 { frames += makeFrame(correlation: correlation, body: patternBody(correlation)) }
            let pair = try AcceptedConnection(on: loop) { $0.write(frames) }
            #expect(pair.client.readAvailable() == frames)
            #expect(pair.server.outputBufferedBytes == 0)

            // And once started: a write, one non-blocking iteration, the bytes are there.
            pair.server.write(frames)
            loop.runOnce()
            #expect(pair.client.readAvailable() == frames)
            pair.server.close()
        }
    }

    /// More than the kernel takes at once: the rest waits in our buffer and goes out as
    /// the peer reads, in order.
    @Test func aWriteLargerThanTheSocketBufferArrivesWholeAsThePeerReads() throws {
        try withEventLoop { loop in
            let total = 8 * 1024 * 1024
            let payload = (0..<total).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 13) }
            let pair = try AcceptedConnection(on: loop) { $0.maxOutputBytes = 2 * total }
            pair.server.write(payload)
            loop.runOnce()
            #expect(pair.server.outputBufferedBytes > 0, "8 MiB should not fit in the kernel's buffers at once")
            var received: [UInt8] = []
            for _ in 0..<100_000 where received.count < total {
                received += pair.client.readAvailable()
                loop.runOnce()
            }
            #expect(received.count == total)
            #expect(received == payload)
            #expect(pair.server.outputBufferedBytes == 0)
            pair.server.close()
        }
    }

    /// A write the kernel refuses for good (the peer reset) closes the connection with
    /// that error rather than leaving the bytes queued forever.
    @Test func aFailedDirectWriteClosesWithTheSocketError() throws {
        try withEventLoop { loop in
            // Not reading: only the write may notice the reset.
            let pair = try AcceptedConnection(on: loop) { $0.pauseReading() }
            pair.client.reset()
            for _ in 0..<200 where pair.recorder.reason == nil {
                pair.server.write(makeFrame(correlation: 1, body: patternBody(1)))
                loop.runOnce()
            }
            switch pair.recorder.reason {
            case .error(let code)?: #expect(code == ECONNRESET || code == EPIPE)
            default: Issue.record("expected a socket error, got \(String(describing: pair.recorder.reason))")
            }
        }
    }

    /// 40 KiB of pipelined frames that sit in the socket together are read and delivered
    /// in one loop pass (libevent's own socket read takes 4 KiB a pass).
    @Test func aBurstOfPipelinedFramesIsDeliveredInOnePass() throws {
        try withEventLoop { loop in
            let pair = try AcceptedConnection(on: loop)
            var burst: [UInt8] = []
            for correlation in UInt32(1)...400 { burst += makeFrame(correlation: correlation, body: [UInt8](repeating: 7, count: 84)) }
            #expect(burst.count == 40_000)
            #expect(write(pair.client.fd, burst, burst.count) == burst.count)
            loop.runOnce(blocking: true)
            #expect(pair.recorder.correlations == Array(1...400))
            pair.server.close()
        }
    }

    /// Only an incomplete frame's own bytes are kept between reads (no read-sized buffer
    /// per connection), and the frame is delivered once its last byte arrives.
    @Test func anIncompleteFrameKeepsOnlyItsOwnBytes() throws {
        try withEventLoop { loop in
            let pair = try AcceptedConnection(on: loop)
            let frame = makeFrame(correlation: 5, body: patternBody(5))
            let firstPart = makeFrame(correlation: 4) + frame[0..<10]
            #expect(write(pair.client.fd, firstPart, firstPart.count) == firstPart.count)
            loop.runOnce(blocking: true)
            #expect(pair.recorder.correlations == [4])
            #expect(pair.server.inputBufferedBytes == 10)
            let rest = Array(frame[10...])
            #expect(write(pair.client.fd, rest, rest.count) == rest.count)
            loop.runOnce(blocking: true)
            #expect(pair.recorder.correlations == [4, 5])
            #expect(pair.server.inputBufferedBytes == 0)
            pair.server.close()
        }
    }

    /// A reset seen by a read closes with the socket error.
    @Test func aResetSeenByAReadClosesWithTheSocketError() throws {
        try withEventLoop { loop in
            let pair = try AcceptedConnection(on: loop)
            pair.client.reset()
            for _ in 0..<200 where pair.recorder.reason == nil { loop.runOnce(blocking: true) }
            #expect(pair.recorder.reason == .error(errno: ECONNRESET))
            #expect(!pair.server.isOpen)
        }
    }

    /// Closing right after writing, inside the same iteration, drops the queued flush
    /// quietly; close-after-flush instead delivers everything before closing.
    @Test func closeAndCloseAfterFlushAfterAWriteInTheSameIteration() throws {
        try withEventLoop { loop in
            let dropped = try AcceptedConnection(on: loop)
            let flushed = try AcceptedConnection(on: loop)
            let frame = makeFrame(correlation: 7, body: patternBody(7))
            dropped.server.write(frame)
            dropped.server.close()
            flushed.server.write(frame)
            flushed.server.closeAfterFlush()
            loop.runOnce()
            #expect(dropped.client.readAvailable().isEmpty)
            #expect(flushed.client.readAvailable() == frame)
            #expect(!dropped.server.isOpen && !flushed.server.isOpen)
        }
    }
}
