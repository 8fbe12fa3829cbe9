import PushEventLoop
import PushWire
import Testing

/// Streams fixed-size frames to its connection on a 1 ms timer and records what the
/// output buffer looked like when the cap was hit.
private final class Firehose: ConnectionHandler {
    let chunk: [UInt8]
    let keepOpen: Bool
    var timer: LoopTimer?
    var writes = 0
    var maxBufferedAfterWrite = 0
    var bufferedAtBackpressure: [Int] = []
    var drained = false
    var closeReason: CloseReason?
    var onEvent: () -> Void = {}

    init(frameSize: Int, keepOpen: Bool) {
        chunk = makeFrame(correlation: 0, body: [UInt8](repeating: 0xAB, count: frameSize - FrameHeader.size))
        self.keepOpen = keepOpen
    }

    func start(_ connection: Connection, loop: EventLoop) {
        timer = loop.schedule(after: .milliseconds(1), repeating: true) { [unowned self] in
            // Several frames per tick so the kernel buffers fill quickly.
            for _ in 0..<4 {
                guard connection.write(chunk) else { return }
                writes += 1
                maxBufferedAfterWrite = max(maxBufferedAfterWrite, connection.outputBufferedBytes)
                if timer == nil { return }
            }
        }
    }

    func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) {}

    func onBackpressure(_ connection: Connection) -> BackpressureAction {
        bufferedAtBackpressure.append(connection.outputBufferedBytes)
        timer?.cancel()
        timer = nil
        onEvent()
        return keepOpen ? .keepOpen : .close
    }

    func onOutputDrained(_ connection: Connection) {
        drained = true
        connection.write(makeFrame(correlation: 99))
        connection.closeAfterFlush()
    }

    func onClose(_ connection: Connection, reason: CloseReason) {
        timer?.cancel()
        timer = nil
        closeReason = reason
        onEvent()
    }
}

extension EventLoopSuite {
    @Test func peerThatNeverReadsIsCutOffAsSlowConsumer() throws {
        let cap = 256 * 1024
        let frameSize = 32 * 1024
        try withEventLoop { loop in
            let firehose = Firehose(frameSize: frameSize, keepOpen: false)
            firehose.onEvent = { [unowned firehose] in if firehose.closeReason != nil { loop.stop() } }
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { connection in
                connection.maxOutputBytes = cap
                connection.handler = firehose
                firehose.start(connection, loop: loop)
            }
            var client: Connection?
            Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port) { result in
                guard case .success(let connection) = result else { return }
                connection.pauseReading()  // never reads: the kernel buffers fill, then ours
                client = connection
            }
            runLoop(loop)
            #expect(firehose.closeReason == .slowConsumer)
            #expect(firehose.bufferedAtBackpressure.count == 1)
            let atCut = firehose.bufferedAtBackpressure.first ?? 0
            #expect(atCut > cap)
            #expect(atCut <= cap + frameSize, "buffered \(atCut) bytes, more than cap + one write")
            #expect(firehose.maxBufferedAfterWrite <= cap)
            // Megabytes went through before the cap was reached: the kernel buffers were full.
            #expect(firehose.writes * frameSize > cap)
            client?.close()
        }
    }

    @Test func ownerCanKeepASlowPeerAndResumeWhenDrained() throws {
        let cap = 128 * 1024
        let frameSize = 16 * 1024
        try withEventLoop { loop in
            let firehose = Firehose(frameSize: frameSize, keepOpen: true)
            var client: Connection?
            var received = 0
            var marker = false
            var clientReason: CloseReason?
            firehose.onEvent = { [unowned firehose] in
                // The first back-pressure report: let the client start reading.
                if firehose.bufferedAtBackpressure.count == 1, firehose.closeReason == nil {
                    client?.resumeReading()
                }
            }
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { connection in
                connection.maxOutputBytes = cap
                connection.handler = firehose
                firehose.start(connection, loop: loop)
            }
            Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port) { result in
                guard case .success(let connection) = result else { return }
                connection.pauseReading()
                connection.callbacks.frame = { _, header, _ in
                    if header.correlation == 99 { marker = true } else { received += 1 }
                }
                connection.callbacks.close = { _, reason in
                    clientReason = reason
                    loop.stop()
                }
                client = connection
            }
            runLoop(loop)
            #expect(firehose.bufferedAtBackpressure.count == 1)
            #expect(firehose.drained)
            #expect(firehose.closeReason == .local)
            // Nothing was dropped: every frame written reached the client, then the marker.
            #expect(received == firehose.writes)
            #expect(marker)
            #expect(clientReason == .peerClosed)
        }
    }
}
