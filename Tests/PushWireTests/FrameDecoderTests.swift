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
