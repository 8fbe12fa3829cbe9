import Testing
import PushWire

/// Frames written by hand on the hot path must be the bytes the generic encoder writes.
@Suite("Direct encoders")
struct DirectEncodeTests {
    @Test("PUSH_ACK written directly equals Message.pushAck's encoding", arguments: [
        (UInt32(0), UInt32(0), UInt32(0)), (1, 0, 7), (0, 1, 0xFFFF_FFFF),
        (0x0102_0304, 0xA0B0_C0D0, 0x8000_0001), (.max, .max, 42),
    ])
    func pushAck(written: UInt32, queued: UInt32, correlation: UInt32) throws {
        let ack = PushAck(written: written, queued: queued)
        var direct: [UInt8] = [0xEE]  // appended after what is already there
        ack.encode(correlation: correlation, into: &direct)
        #expect(direct == [0xEE] + Message.pushAck(ack).encoded(correlation: correlation))
        var decoder = FrameDecoder()
        decoder.feed(Array(direct.dropFirst()))
        let frame = try #require(try decoder.next())
        #expect(try Message.decode(frame) == .pushAck(ack))
    }
}
