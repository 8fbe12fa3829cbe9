import Foundation
import PushClock
import PushEventLoop
import PushSession
import PushWire
import Testing

/// One delivered frame, copied out of the connection's input.
struct DeliveredFrame: Equatable {
    var header: FrameHeader
    var body: [UInt8]
}

/// Copies out every frame it is given; can pause after each one.
final class FrameLog: ConnectionHandler {
    var frames: [DeliveredFrame] = []
    /// Bytes of the frames delivered so far (headers included).
    var consumed = 0
    var pauseAfterEachFrame = false
    var error: WireError?
    var bufferedAtError = -1
    var reason: CloseReason?

    func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) {
        frames.append(DeliveredFrame(header: header, body: Array(body)))
        consumed += header.frameLength
        if pauseAfterEachFrame { connection.pauseReading() }
    }

    func onFramingError(_ connection: Connection, error: WireError) {
        self.error = error
        bufferedAtError = connection.inputBufferedBytes
        connection.close(reason: .framingError(error))
    }

    func onClose(_ connection: Connection, reason: CloseReason) { self.reason = reason }
}

/// The valid golden frames of protocol/vectors, back to back, and what each must come
/// out as.
private let vectorStream: (bytes: [UInt8], frames: [DeliveredFrame]) = {
    let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("protocol/vectors")
    var bytes: [UInt8] = []
    var frames: [DeliveredFrame] = []
    let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
    for name in names.sorted() where name.hasSuffix(".vec") {
        guard let text = try? String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8),
              let vectors = try? TestVector.parseFile(text) else { continue }
        for vector in vectors {
            guard case .message = vector.expectation, vector.maxFrame >= FrameLimits.defaultMaxFrame,
                  vector.bytes.count <= FrameLimits.defaultMaxFrame else { continue }
            let header = vector.bytes.withUnsafeBytes { try? FrameHeader.parse($0, maxFrame: FrameLimits.defaultMaxFrame) }
            guard let header, header.frameLength == vector.bytes.count else { continue }
            bytes += vector.bytes
            frames.append(DeliveredFrame(header: header, body: Array(vector.bytes[FrameHeader.size...])))
        }
    }
    return (bytes, frames)
}()

/// Generated frames with scattered body sizes, some larger than one 64 KiB read.
private func generatedStream(count: Int, maxBody: Int) -> (bytes: [UInt8], frames: [DeliveredFrame]) {
    var bytes: [UInt8] = []
    var frames: [DeliveredFrame] = []
    for correlation in UInt32(0)..<UInt32(count) {
        let body = patternBody(correlation, maxLength: maxBody)
        let frame = makeFrame(correlation: correlation, body: body)
        bytes += frame
        frames.append(DeliveredFrame(header: FrameHeader(rawType: 0x42, correlation: correlation, status: .ok,
                                                         bodyLength: UInt32(body.count)), body: body))
    }
    return (bytes, frames)
}

/// A deterministic generator, so a failing split can be reproduced.
private struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension EventLoopSuite {
    /// Sends `pieces` one at a time from a raw client, letting the server's loop take in
    /// each before the next, and returns what the server's connection delivered.
    private func deliver(_ pieces: [ArraySlice<UInt8>], on loop: EventLoop, to pair: AcceptedConnection,
                         log: FrameLog) -> [DeliveredFrame] {
        log.frames.removeAll()
        var sent = log.consumed + pair.server.inputBufferedBytes
        for piece in pieces where !piece.isEmpty {
            pair.client.send(piece)
            sent += piece.count
            // Bounded: a repeating timer set by the caller wakes each blocking pass.
            for _ in 0..<1_000 where log.consumed + pair.server.inputBufferedBytes < sent && pair.server.isOpen {
                loop.runOnce(blocking: true)
            }
        }
        return log.frames
    }

    private func withLoggedConnection(_ body: (EventLoop, AcceptedConnection, FrameLog) throws -> Void) throws {
        try withEventLoop { loop in
            let log = FrameLog()
            let pair = try AcceptedConnection(on: loop) { $0.handler = log }
            let ticker = loop.schedule(after: .milliseconds(20), repeating: true) {}
            try body(loop, pair, log)
            ticker.cancel()
            pair.server.close()
        }
    }

    @Test func goldenVectorsSplitAtEveryOffsetArriveWhole() throws {
        let stream = vectorStream
        #expect(stream.frames.count >= 20, "the valid golden vectors did not load")
        try withLoggedConnection { loop, pair, log in
            for cut in 0...stream.bytes.count {
                let frames = deliver([stream.bytes[..<cut], stream.bytes[cut...]], on: loop, to: pair, log: log)
                #expect(frames == stream.frames, "split at \(cut)")
                #expect(pair.server.inputBufferedBytes == 0)
                if frames != stream.frames { break }
            }
        }
    }

    @Test func goldenVectorsSentByteByByteArriveWhole() throws {
        let stream = vectorStream
        try withLoggedConnection { loop, pair, log in
            let pieces = stream.bytes.indices.map { stream.bytes[$0 ... $0] }
            #expect(deliver(pieces, on: loop, to: pair, log: log) == stream.frames)
        }
    }

    @Test func framesInRandomChunksArriveWhole() throws {
        // Small frames in small chunks, then frames up to 100 KiB (over the default limit,
        // so it is raised, and over one 64 KiB read) in chunks up to 32 KB.
        let small = generatedStream(count: 200, maxBody: 300)
        let large = generatedStream(count: 40, maxBody: 100_000)
        try withEventLoop { loop in
            let log = FrameLog()
            let pair = try AcceptedConnection(on: loop) {
                $0.handler = log
                $0.maxFrame = 200_000
            }
            let ticker = loop.schedule(after: .milliseconds(20), repeating: true) {}
            var random = SplitMix(state: 7)
            for (stream, maxChunk) in [(small, 64), (large, 32_000), (large, 32_000)] {
                var pieces: [ArraySlice<UInt8>] = []
                var offset = 0
                while offset < stream.bytes.count {
                    let end = min(offset + Int.random(in: 1...maxChunk, using: &random), stream.bytes.count)
                    pieces.append(stream.bytes[offset..<end])
                    offset = end
                }
                #expect(deliver(pieces, on: loop, to: pair, log: log) == stream.frames, "chunks up to \(maxChunk)")
                #expect(pair.server.inputBufferedBytes == 0)
            }
            ticker.cancel()
            pair.server.close()
        }
    }

    /// Frames held back by a pause stay buffered whole, and each resume delivers from
    /// that buffer without another byte arriving.
    @Test func pauseHoldsWholeFramesAndResumeDeliversThemWithoutNewInput() throws {
        let stream = generatedStream(count: 6, maxBody: 300)
        try withLoggedConnection { loop, pair, log in
            log.pauseAfterEachFrame = true
            pair.client.send(stream.bytes)
            for _ in 0..<100 where log.frames.isEmpty { loop.runOnce(blocking: true) }
            #expect(log.frames == Array(stream.frames.prefix(1)))
            #expect(pair.server.inputBufferedBytes == stream.bytes.count - stream.frames[0].header.frameLength)
            // Whole frames waiting on the owner are not a peer's partial frame.
            #expect(pair.server.partialFrameSinceMillis == nil)
            for delivered in 2...stream.frames.count {
                pair.server.resumeReading()
                for _ in 0..<100 where log.frames.count < delivered { loop.runOnce(blocking: true) }
                #expect(log.frames == Array(stream.frames.prefix(delivered)))
            }
            #expect(pair.server.inputBufferedBytes == 0)
            // New input after the held-back frames is delivered behind them.
            log.pauseAfterEachFrame = false
            pair.server.resumeReading()
            let more = generatedStream(count: 3, maxBody: 50)
            pair.client.send(more.bytes)
            for _ in 0..<100 where log.frames.count < stream.frames.count + 3 { loop.runOnce(blocking: true) }
            #expect(log.frames == stream.frames + more.frames)
        }
    }

    /// A bad header that arrives in a later read than the frames before it: those frames
    /// are delivered, the error is reported once, and nothing after the header is kept.
    @Test func aFramingErrorAfterWholeFramesStopsReadingThere() throws {
        let good = generatedStream(count: 3, maxBody: 100)
        var bad = makeFrame(correlation: 9, body: [UInt8](repeating: 1, count: 40))
        bad[1] = 7  // version
        try withLoggedConnection { loop, pair, log in
            let frames = deliver([good.bytes[...] + bad[..<5], bad[5...]], on: loop, to: pair, log: log)
            #expect(frames == good.frames)
            #expect(log.error == .unsupportedVersion(7))
            #expect(log.bufferedAtError == 0)
            #expect(log.reason == .framingError(.unsupportedVersion(7)))
        }
    }

    @Test func partialFrameSinceIsSetWhileAFrameIsIncompleteAndClearedAfter() throws {
        let frame = makeFrame(correlation: 3, body: patternBody(3))
        try withLoggedConnection { loop, pair, log in
            #expect(pair.server.partialFrameSinceMillis == nil)
            let before = Clocks.monotonicMilliseconds()
            _ = deliver([frame[...] + frame[..<5]], on: loop, to: pair, log: log)
            let since = pair.server.partialFrameSinceMillis
            #expect((since ?? 0) >= before, "set when the partial frame arrived")
            #expect(pair.server.inputBufferedBytes == 5)
            // More of the same frame does not restart the clock.
            _ = deliver([frame[5..<40]], on: loop, to: pair, log: log)
            #expect(pair.server.partialFrameSinceMillis == since)
            _ = deliver([frame[40...]], on: loop, to: pair, log: log)
            #expect(pair.server.partialFrameSinceMillis == nil)
            #expect(pair.server.inputBufferedBytes == 0)
            #expect(log.frames.map(\.header.correlation) == [3])
        }
    }
}

/// Records raw input from a connection that is not framed.
private final class ByteLog: ConnectionHandler {
    var bytes: [UInt8] = []
    var reads = 0
    var frames = 0
    var pauseAfterRead = false

    func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) { frames += 1 }

    func onBytes(_ connection: Connection, bytes: UnsafeRawBufferPointer) {
        self.bytes += bytes
        reads += 1
        if pauseAfterRead { connection.pauseReading() }
    }
}

extension EventLoopSuite {
    /// With framing off, bytes that would be a framing error are just bytes, delivered
    /// as they arrive; pausing stops the reads.
    @Test func anUnframedConnectionDeliversRawBytes() throws {
        try withEventLoop { loop in
            let log = ByteLog()
            let pair = try AcceptedConnection(on: loop) {
                $0.isFramed = false
                $0.handler = log
            }
            let ticker = loop.schedule(after: .milliseconds(20), repeating: true) {}
            let garbage = [UInt8](repeating: 0x55, count: 100)
            pair.client.send(garbage)
            for _ in 0..<100 where log.bytes.count < 100 { loop.runOnce(blocking: true) }
            #expect(log.bytes == garbage)
            #expect(log.frames == 0)
            #expect(pair.server.isOpen)
            #expect(pair.server.inputBufferedBytes == 0)

            log.pauseAfterRead = true
            let frame = makeFrame(correlation: 1, body: [1, 2, 3])
            pair.client.send(frame)
            for _ in 0..<100 where log.bytes.count < 100 + frame.count { loop.runOnce(blocking: true) }
            let readsWhenPaused = log.reads
            pair.client.send(frame)
            loop.runOnce(blocking: true)
            #expect(log.reads == readsWhenPaused, "no read while paused")
            log.pauseAfterRead = false
            pair.server.resumeReading()
            for _ in 0..<100 where log.bytes.count < 100 + 2 * frame.count { loop.runOnce(blocking: true) }
            #expect(log.bytes == garbage + frame + frame)
            #expect(log.frames == 0)
            ticker.cancel()
            pair.server.close()
        }
    }
}
