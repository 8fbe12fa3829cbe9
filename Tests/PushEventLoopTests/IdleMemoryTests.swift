import Glibc
@testable import PushEventLoop
import PushWire
import Testing

/// An idle plain-TCP connection holds only its read event: the output buffer and the
/// write event exist while output waits, and are freed again once it has gone out.
extension EventLoopSuite {
    private func transport(of connection: Connection) -> PlainTCPTransport? {
        connection.transport as? PlainTCPTransport
    }

    @Test func anIdleConnectionHoldsNoOutputBufferNorWriteEvent() throws {
        try withEventLoop { loop in
            let pair = try AcceptedConnection(on: loop)
            loop.runOnce()
            let plain = try #require(transport(of: pair.server))
            #expect(!plain.holdsOutputBuffer && !plain.holdsWriteEvent)

            // A small write: staged in the loop's slot for the iteration (no evbuffer),
            // gone with the flush.
            let frame = makeFrame(correlation: 1, body: patternBody(1))
            pair.server.write(frame)
            #expect(plain.holdsStagedBytes && !plain.holdsOutputBuffer)
            loop.runOnce()
            #expect(pair.client.readAvailable() == frame)
            #expect(!plain.holdsOutputBuffer && !plain.holdsWriteEvent)
            pair.server.close()
        }
    }

    /// More than the kernel takes: the buffer and the write event come back while the
    /// peer reads, every byte arrives in order, and both are freed once it is drained.
    @Test func buffersGrowForALargeWriteAndAreReleasedWhenDrained() throws {
        try withEventLoop { loop in
            let total = 4 * 1024 * 1024
            let payload = (0..<total).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 11) }
            let pair = try AcceptedConnection(on: loop) { $0.maxOutputBytes = 2 * total }
            let plain = try #require(transport(of: pair.server))
            pair.server.write(payload)
            loop.runOnce()
            #expect(pair.server.outputBufferedBytes > 0, "4 MiB should not fit in the kernel's buffers at once")
            #expect(plain.holdsOutputBuffer && plain.holdsWriteEvent)
            var received: [UInt8] = []
            for _ in 0..<100_000 where received.count < total {
                received += pair.client.readAvailable()
                loop.runOnce()
            }
            #expect(received == payload)
            #expect(pair.server.outputBufferedBytes == 0)
            #expect(!plain.holdsOutputBuffer && !plain.holdsWriteEvent)

            // And it still writes afterwards.
            let frame = makeFrame(correlation: 2, body: patternBody(2))
            pair.server.write(frame)
            loop.runOnce()
            #expect(pair.client.readAvailable() == frame)
            #expect(!plain.holdsOutputBuffer)
            pair.server.close()
        }
    }

    /// Close-after-flush still waits for the output (the write event comes back for it)
    /// and then closes with the reason given.
    @Test func closeAfterFlushStillDeliversWhatWasQueued() throws {
        try withEventLoop { loop in
            let total = 2 * 1024 * 1024
            let payload = [UInt8](repeating: 0x5A, count: total)
            let pair = try AcceptedConnection(on: loop) { $0.maxOutputBytes = 2 * total }
            pair.server.write(payload)
            pair.server.closeAfterFlush(reason: .local, timeout: .seconds(10))
            var received = 0
            for _ in 0..<100_000 where pair.recorder.reason == nil {
                received += pair.client.readAvailable().count
                loop.runOnce()
            }
            received += pair.client.readAvailable().count
            #expect(received == total)
            #expect(pair.recorder.reason == .local)
        }
    }
}
