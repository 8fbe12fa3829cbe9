import Testing
import PushWire

/// A frame assembled byte by byte, so tests can break any rule the encoder keeps.
func rawFrame(type: UInt8, correlation: UInt32 = 1, status: UInt16 = 0, flags: UInt8 = 0, reserved: UInt16 = 0,
              magic: UInt8 = FrameHeader.magic, version: UInt8 = 1, length: UInt32? = nil, body: [UInt8] = []) -> [UInt8] {
    var out: [UInt8] = [magic, version, type, flags]
    func put<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.bigEndian) { out.append(contentsOf: $0) }
    }
    put(correlation)
    put(status)
    put(reserved)
    put(length ?? UInt32(body.count))
    return out + body
}

/// One TLV field with a minimal varint length.
func field(_ tag: UInt8, _ value: [UInt8]) -> [UInt8] {
    var out: [UInt8] = [tag]
    Varint.append(value.count, to: &out)
    return out + value
}

@Suite("FrameDecoder")
struct FrameDecoderTests {
    static let stream: [UInt8] = Samples.all.enumerated().flatMap { index, message in
        message.encoded(correlation: UInt32(index))
    }

    static func decodeAll(_ chunks: [[UInt8]]) throws -> [Frame] {
        var decoder = FrameDecoder(maxFrame: FrameLimits.ceiling)
        var frames: [Frame] = []
        for chunk in chunks {
            decoder.feed(chunk)
            while let frame = try decoder.next() { frames.append(frame) }
        }
        #expect(decoder.bufferedByteCount == 0)
        return frames
    }

    @Test("[2-1] a stream of every message decodes whole, byte by byte and in odd chunks alike")
    func splitsDoNotMatter() throws {
        let whole = try Self.decodeAll([Self.stream])
        #expect(whole.count == Samples.all.count)
        #expect(try whole.map { try Message.decode($0) } == Samples.all)
        #expect(try Self.decodeAll(Self.stream.map { [$0] }) == whole)
        for size in [2, 3, 7, 15, 16, 17, 100, 4099] {
            let chunks = stride(from: 0, to: Self.stream.count, by: size).map {
                Array(Self.stream[$0..<min($0 + size, Self.stream.count)])
            }
            #expect(try Self.decodeAll(chunks) == whole, "chunk size \(size)")
        }
    }

    @Test("a frame split at every offset comes out the same", arguments: Samples.all.indices)
    func everyOffset(index: Int) throws {
        let bytes = Samples.all[index].encoded(correlation: 5)
        let expected = try Self.decodeAll([bytes])
        for cut in 0...bytes.count {
            #expect(try Self.decodeAll([Array(bytes[..<cut]), Array(bytes[cut...])]) == expected, "cut at \(cut)")
        }
    }

    @Test("[2-12] a partial header or body yields nothing yet")
    func partial() throws {
        let bytes = Message.ping.encoded(correlation: 1) + Message.store(StoreRequest(user: "u", payload: [1, 2, 3])).encoded(correlation: 2)
        var decoder = FrameDecoder()
        decoder.feed(Array(bytes[..<7]))
        #expect(try decoder.next() == nil)
        decoder.feed(Array(bytes[7..<20]))
        #expect(try decoder.next()?.header.type == .ping)
        #expect(try decoder.next() == nil)
        decoder.feed(Array(bytes[20...]))
        #expect(try decoder.next()?.header.type == .store)
    }

    @Test("[2-7] a length over the maximum is refused from the header alone")
    func oversizeFromHeader() {
        var decoder = FrameDecoder(maxFrame: 1024)
        decoder.feed(rawFrame(type: MessageType.store.rawValue, length: 0xFFFF_FFFF))
        #expect(throws: WireError.frameTooLarge(length: 0xFFFF_FFFF, max: 1024)) { try decoder.next() }
        // Nothing of the announced body is kept, and the decoder stays failed.
        #expect(decoder.bufferedByteCount == 0)
        decoder.feed(Message.ping.encoded(correlation: 1))
        #expect(decoder.bufferedByteCount == 0)
        #expect(throws: WireError.self) { try decoder.next() }
    }

    @Test("[2-8] a frame exactly at the maximum passes, one byte more does not")
    func maxBoundary() throws {
        var decoder = FrameDecoder(maxFrame: 1024)
        decoder.feed(rawFrame(type: MessageType.ping.rawValue, body: Array(repeating: 0, count: 1024 - 16)))
        #expect(try decoder.next() != nil)
        decoder.feed(rawFrame(type: MessageType.ping.rawValue, body: Array(repeating: 0, count: 1024 - 15)))
        #expect(throws: WireError.frameTooLarge(length: 1009, max: 1024)) { try decoder.next() }
    }

    @Test("[2-2] bad magic, [2-3] bad version, [2-5] flags and [2-6] reserved bits are fatal")
    func headerFaults() {
        let cases: [([UInt8], WireError)] = [
            (rawFrame(type: 3, magic: 0x47), .badMagic(0x47)),
            (rawFrame(type: 3, version: 2), .unsupportedVersion(2)),
            (rawFrame(type: 3, version: 0), .unsupportedVersion(0)),
            (rawFrame(type: 3, flags: 0x80), .reservedBitsSet),
            (rawFrame(type: 3, reserved: 1), .reservedBitsSet),
        ]
        for (bytes, expected) in cases {
            var decoder = FrameDecoder()
            decoder.feed(bytes)
            #expect(throws: expected) { try decoder.next() }
            #expect(expected.isFatal)
        }
    }

    @Test("a long stream keeps the buffer bounded")
    func bufferCompacts() throws {
        var decoder = FrameDecoder()
        let frame = Message.store(StoreRequest(user: "u", payload: Array(repeating: 1, count: 1000))).encoded(correlation: 1)
        for _ in 0..<10_000 {
            decoder.feed(frame)
            _ = try decoder.next()
        }
        #expect(decoder.bufferedByteCount == 0)
    }
}

/// The in-place API, `decode(_:maxFrame:_:)`: what the event loop's read path uses.
@Suite("FrameDecoder in place")
struct FrameDecoderInPlaceTests {
    static let stream = FrameDecoderTests.stream

    /// Decodes `chunks` in place, copying out what is delivered.
    static func decodeInPlace(_ chunks: [[UInt8]], maxFrame: Int = FrameLimits.ceiling) throws -> [Frame] {
        var decoder = FrameDecoder()
        var frames: [Frame] = []
        for chunk in chunks {
            try chunk.withUnsafeBytes { raw in
                try decoder.decode(raw, maxFrame: maxFrame) { header, body in
                    frames.append(Frame(header: header, body: Array(body)))
                    return true
                }
            }
        }
        #expect(decoder.bufferedByteCount == 0)
        #expect(!decoder.holdsPartialFrame)
        return frames
    }

    static func chunks(_ bytes: [UInt8], sizes: some Sequence<Int>) -> [[UInt8]] {
        var result: [[UInt8]] = []
        var offset = 0
        var sizes = sizes.makeIterator()
        while offset < bytes.count, let size = sizes.next() {
            let end = min(offset + size, bytes.count)
            result.append(Array(bytes[offset..<end]))
            offset = end
        }
        if offset < bytes.count { result.append(Array(bytes[offset...])) }
        return result
    }

    @Test("[2-1] a stream split at every offset, byte by byte and in random chunks decodes as a whole")
    func everySplit() throws {
        let whole = try FrameDecoderTests.decodeAll([Self.stream])
        #expect(try Self.decodeInPlace([Self.stream]) == whole)
        for cut in 0...Self.stream.count {
            let frames = try Self.decodeInPlace([Array(Self.stream[..<cut]), Array(Self.stream[cut...])])
            #expect(frames == whole, "split at \(cut)")
            if frames != whole { break }
        }
        #expect(try Self.decodeInPlace(Self.stream.map { [$0] }) == whole)
        var random = SystemRandomNumberGenerator()
        for _ in 0..<20 {
            let sizes = (0..<Self.stream.count).map { _ in Int.random(in: 1...300, using: &random) }
            #expect(try Self.decodeInPlace(Self.chunks(Self.stream, sizes: sizes)) == whole)
        }
    }

    @Test("whole frames are delivered as pointers into the chunk; only an incomplete tail is kept")
    func inPlaceAndTail() throws {
        let first = Message.ping.encoded(correlation: 1)
        let second = Message.store(StoreRequest(user: "u", payload: [1, 2, 3])).encoded(correlation: 2)
        let bytes = first + second + second[..<10]
        var decoder = FrameDecoder()
        var inside = 0
        try bytes.withUnsafeBytes { raw in
            try decoder.decode(raw) { _, body in
                if let base = body.baseAddress, let start = raw.baseAddress,
                   base >= start + FrameHeader.size, base + body.count <= start + raw.count {
                    inside += 1
                }
                return true
            }
        }
        #expect(inside == 2)
        #expect(decoder.bufferedByteCount == 10)
        #expect(decoder.holdsPartialFrame)
        var delivered: [UInt32] = []
        try Array(second[10...]).withUnsafeBytes { raw in
            try decoder.decode(raw) { header, _ in
                delivered.append(header.correlation)
                return true
            }
        }
        #expect(delivered == [2])
        #expect(decoder.bufferedByteCount == 0)
        #expect(!decoder.holdsPartialFrame)
    }

    @Test("a stop keeps the rest, whole, for the next call, at every stop point and split")
    func stopAndResume() throws {
        let whole = try FrameDecoderTests.decodeAll([Self.stream])
        for stopEvery in [1, 2, 5] {
            for size in [1, 7, 16, 100, Self.stream.count] {
                var decoder = FrameDecoder(maxFrame: FrameLimits.ceiling)
                var frames: [Frame] = []
                func run(_ chunk: UnsafeRawBufferPointer) throws {
                    try decoder.decode(chunk) { header, body in
                        frames.append(Frame(header: header, body: Array(body)))
                        return frames.count % stopEvery != 0
                    }
                }
                for chunk in Self.chunks(Self.stream, sizes: repeatElement(size, count: Int.max)) {
                    try chunk.withUnsafeBytes { try run($0) }
                    // Held-back frames come out one stop at a time, with nothing new.
                    var before = -1
                    while frames.count != before, decoder.bufferedByteCount > 0 {
                        before = frames.count
                        try run(UnsafeRawBufferPointer(start: nil, count: 0))
                    }
                }
                #expect(frames == whole, "stop every \(stopEvery), chunks of \(size)")
                #expect(decoder.bufferedByteCount == 0)
            }
        }
    }

    @Test("a stop holds whole frames, which are not a partial frame")
    func heldBackIsNotPartial() throws {
        let bytes = Message.ping.encoded(correlation: 1) + Message.pong.encoded(correlation: 2)
        var decoder = FrameDecoder()
        try bytes.withUnsafeBytes { raw in try decoder.decode(raw) { _, _ in false } }
        #expect(decoder.bufferedByteCount == FrameHeader.size)
        #expect(!decoder.holdsPartialFrame)
    }

    @Test("[2-2] frames before a bad header are delivered, then the decoder stays failed")
    func errorAfterWholeFrames() throws {
        let good = Message.ping.encoded(correlation: 1) + Message.pong.encoded(correlation: 2)
        let bad = rawFrame(type: 3, magic: 0x47, body: [1, 2, 3, 4])
        let bytes = good + bad
        for cut in 0...bytes.count {
            var decoder = FrameDecoder()
            var delivered: [UInt32] = []
            var thrown: WireError?
            for chunk in [Array(bytes[..<cut]), Array(bytes[cut...])] {
                do {
                    try chunk.withUnsafeBytes { raw in
                        try decoder.decode(raw) { header, _ in
                            delivered.append(header.correlation)
                            return true
                        }
                    }
                } catch {
                    thrown = error as? WireError
                    break
                }
            }
            #expect(delivered == [1, 2], "cut at \(cut)")
            #expect(thrown == .badMagic(0x47), "cut at \(cut)")
            #expect(decoder.error == .badMagic(0x47))
            #expect(decoder.bufferedByteCount == 0)
            #expect(throws: WireError.badMagic(0x47)) {
                try Message.ping.encoded(correlation: 3).withUnsafeBytes { raw in try decoder.decode(raw) { _, _ in true } }
            }
            #expect(throws: WireError.badMagic(0x47)) { try decoder.next() }
        }
    }

    @Test("[2-7] an oversized length split across chunks is refused before a body byte is kept")
    func oversizeAcrossChunks() throws {
        let header = rawFrame(type: MessageType.store.rawValue, length: 0xFFFF_FFFF)
        for cut in 1..<FrameHeader.size {
            var decoder = FrameDecoder(maxFrame: 1024)
            try Array(header[..<cut]).withUnsafeBytes { raw in try decoder.decode(raw) { _, _ in true } }
            #expect(decoder.bufferedByteCount == cut)
            #expect(decoder.holdsPartialFrame)
            let rest = Array(header[cut...]) + [UInt8](repeating: 0, count: 100)
            #expect(throws: WireError.frameTooLarge(length: 0xFFFF_FFFF, max: 1024)) {
                try rest.withUnsafeBytes { raw in try decoder.decode(raw) { _, _ in true } }
            }
            #expect(decoder.bufferedByteCount == 0)
        }
    }

    @Test("[2-8] the limit is read before each header, so a frame may change it for the next")
    func limitPerHeader() throws {
        let bytes = rawFrame(type: 3, body: Array(repeating: 1, count: 1500)) + rawFrame(type: 3, body: Array(repeating: 2, count: 1500))
        var decoder = FrameDecoder()
        var limit = FrameLimits.ceiling
        var delivered = 0
        #expect(throws: WireError.frameTooLarge(length: 1500, max: 1024)) {
            try bytes.withUnsafeBytes { raw in
                try decoder.decode(raw, maxFrame: limit) { _, _ in
                    delivered += 1
                    limit = 1024
                    return true
                }
            }
        }
        #expect(delivered == 1)
    }
}
