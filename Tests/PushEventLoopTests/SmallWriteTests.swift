import Glibc
@testable import PushEventLoop
import PushWire
import Testing

/// Small writes on plain TCP are staged in the loop's slots and sent with one `send` at
/// the end of the iteration; an evbuffer takes over when a write outgrows the slot, when
/// the slots run out, and when the kernel refuses bytes. None of that may change what
/// the peer receives.
extension EventLoopSuite {
    private func plain(_ connection: Connection) throws -> PlainTCPTransport {
        try #require(connection.transport as? PlainTCPTransport)
    }

    /// Reads from `client` until `count` bytes arrived, running the loop meanwhile.
    private func receive(_ count: Int, from client: RawClient, on loop: EventLoop) -> [UInt8] {
        var received: [UInt8] = []
        for _ in 0..<100_000 where received.count < count {
            received += client.readAvailable()
            if received.count < count { loop.runOnce() }
        }
        return received
    }

    private func smallFrames(_ range: ClosedRange<UInt32>) -> [[UInt8]] {
        range.map { makeFrame(correlation: $0, body: patternBody($0, maxLength: 40)) }
    }

    /// Hundreds of small frames in one iteration, far more than one slot holds: they
    /// arrive whole and in order, and nothing is left held afterwards.
    @Test func manySmallWritesInOneIterationArriveInOrderAndWhole() throws {
        try withEventLoop { loop in
            let pair = try AcceptedConnection(on: loop)
            loop.runOnce()
            let transport = try plain(pair.server)
            let frames = smallFrames(1...500)
            let expected = frames.flatMap { $0 }
            for frame in frames.prefix(3) { pair.server.write(frame) }
            #expect(transport.holdsStagedBytes && !transport.holdsOutputBuffer)
            for frame in frames.dropFirst(3) { pair.server.write(frame) }
            #expect(pair.server.outputBufferedBytes == expected.count)
            loop.runOnce()
            #expect(receive(expected.count, from: pair.client, on: loop) == expected)
            #expect(!transport.holdsStagedBytes && !transport.holdsOutputBuffer && !transport.holdsWriteEvent)
            pair.server.close()
        }
    }

    /// More connections writing in one iteration than the loop has slots: the full slots
    /// go out early, and every connection's bytes arrive whole.
    @Test func moreWritersThanSlotsAllDeliver() throws {
        try withEventLoop { loop in
            let count = EventLoop.stagingSlotCount * 2 + 7
            var accepted: [Connection] = []
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { connection in
                connection.handler = ClosingRecorder()
                accepted.append(connection)
            }
            var clients: [RawClient] = []
            for _ in 0..<count {
                clients.append(try RawClient(port: listener.port))
                loop.runOnce()
            }
            for _ in 0..<200 where accepted.count < count { loop.runOnce(blocking: true) }
            try #require(accepted.count == count)
            // Which client is which connection: each learns its peer's port.
            var framesByPort: [UInt16: [UInt8]] = [:]
            for (index, connection) in accepted.enumerated() {
                let frames = smallFrames(UInt32(index * 3 + 1)...UInt32(index * 3 + 3)).flatMap { $0 }
                let port = try #require(connection.peerAddress).port
                framesByPort[UInt16(port)] = frames
                // Two writes each, the second after the others have taken their slots.
                connection.write(Array(frames.prefix(10)))
            }
            for connection in accepted {
                let port = UInt16(try #require(connection.peerAddress).port)
                connection.write(Array(try #require(framesByPort[port]).dropFirst(10)))
            }
            loop.runOnce()
            for client in clients {
                let port = UInt16(try #require(SocketAddress.local(of: client.fd)).port)
                let expected = try #require(framesByPort[port])
                #expect(receive(expected.count, from: client, on: loop) == expected)
            }
            for connection in accepted { connection.close() }
            listener.close()
        }
    }

    /// Staged bytes, then a write too big for a slot, then small ones again, while the
    /// large one is still queued: the peer gets them in the order written.
    @Test func smallAndLargeWritesKeepTheirOrder() throws {
        try withEventLoop { loop in
            let large = (0..<(8 * 1024 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ $0 >> 9) }
            let pair = try AcceptedConnection(on: loop) { $0.maxOutputBytes = 32 * 1024 * 1024 }
            loop.runOnce()
            let transport = try plain(pair.server)
            let before = smallFrames(1...5).flatMap { $0 }
            let after = smallFrames(6...60).flatMap { $0 }
            pair.server.write(before)
            #expect(transport.holdsStagedBytes)
            pair.server.write(large)
            #expect(!transport.holdsStagedBytes && transport.holdsOutputBuffer)
            loop.runOnce()
            #expect(pair.server.outputBufferedBytes > 0, "8 MiB should not fit in the kernel's buffers at once")
            // Written while the large one waits: behind it, not staged ahead of it.
            for frame in smallFrames(6...60) { pair.server.write(frame) }
            #expect(!transport.holdsStagedBytes)
            let expected = before + large + after
            #expect(receive(expected.count, from: pair.client, on: loop) == expected)
            #expect(!transport.holdsStagedBytes && !transport.holdsOutputBuffer && !transport.holdsWriteEvent)
            pair.server.close()
        }
    }

    /// A peer that stops reading: the kernel refuses part of a staged send, the rest moves
    /// to an evbuffer with the write event armed, later small writes queue behind it, and
    /// everything arrives in order once the peer reads; then the buffers are freed.
    @Test func aKernelRefusingStagedBytesFallsBackAndStillDelivers() throws {
        try withEventLoop { loop in
            let pair = try AcceptedConnection(on: loop) { $0.maxOutputBytes = 64 * 1024 * 1024 }
            loop.runOnce()
            let transport = try plain(pair.server)
            var small: Int32 = 4096
            setsockopt(transport.fd, SOL_SOCKET, SO_SNDBUF, &small, socklen_t(MemoryLayout<Int32>.size))
            var expected: [UInt8] = []
            var correlation: UInt32 = 0
            // One small frame per iteration until the kernel holds some back.
            for _ in 0..<200_000 where !transport.holdsOutputBuffer {
                correlation += 1
                let frame = makeFrame(correlation: correlation, body: patternBody(correlation, maxLength: 60))
                expected += frame
                pair.server.write(frame)
                loop.runOnce()
            }
            #expect(transport.holdsOutputBuffer && transport.holdsWriteEvent && !transport.holdsStagedBytes)
            for _ in 0..<20 {
                correlation += 1
                let frame = makeFrame(correlation: correlation, body: patternBody(correlation, maxLength: 60))
                expected += frame
                pair.server.write(frame)
                #expect(!transport.holdsStagedBytes)
            }
            #expect(receive(expected.count, from: pair.client, on: loop) == expected)
            loop.runOnce()
            #expect(!transport.holdsStagedBytes && !transport.holdsOutputBuffer && !transport.holdsWriteEvent)
            pair.server.close()
        }
    }

    /// Close-after-flush with only staged bytes queued: they are sent, then it closes
    /// with the reason given.
    @Test func closeAfterFlushSendsStagedBytes() throws {
        try withEventLoop { loop in
            let pair = try AcceptedConnection(on: loop)
            loop.runOnce()
            let frames = smallFrames(1...4).flatMap { $0 }
            pair.server.write(frames)
            #expect(try plain(pair.server).holdsStagedBytes)
            pair.server.closeAfterFlush(reason: .local, timeout: .seconds(10))
            #expect(pair.server.isOpen)
            for _ in 0..<1000 where pair.recorder.reason == nil { loop.runOnce() }
            #expect(pair.recorder.reason == .local)
            #expect(pair.client.readAvailable() == frames)
        }
    }

    /// Closing with staged bytes drops them and gives the slot back.
    @Test func closeDropsStagedBytesAndFreesTheSlot() throws {
        try withEventLoop { loop in
            let pair = try AcceptedConnection(on: loop)
            loop.runOnce()
            pair.server.write(smallFrames(1...2).flatMap { $0 })
            pair.server.close()
            loop.runOnce()
            #expect(pair.recorder.reason == .local)
            // The loop's slots are all free again: one full round of them stages without
            // an early send.
            let second = try AcceptedConnection(on: loop)
            loop.runOnce()
            second.server.write(smallFrames(3...3).flatMap { $0 })
            #expect(try plain(second.server).holdsStagedBytes)
            loop.runOnce()
            #expect(second.client.readAvailable() == smallFrames(3...3).flatMap { $0 })
            second.server.close()
        }
    }
}
