import PushEventLoop
import PushWire

/// An encoded request kept for reuse: each send patches the correlation id (and, where
/// the request has one, the 16-byte id) in place and writes the same buffer, so the
/// bench's hot path neither encodes nor allocates.
struct FrameTemplate {
    private var bytes: [UInt8]
    /// Offset of the `id` value inside the frame, or -1 when the message has none.
    private let idOffset: Int

    /// `message` must carry a 16-byte `id` if `idOffset` is to be patched later.
    init(_ message: Message) {
        bytes = message.encoded(correlation: 0)
        idOffset = bytes.withUnsafeBytes { frame in
            let body = UnsafeRawBufferPointer(rebasing: frame[FrameHeader.size...])
            guard let value = FieldScan.value(of: FieldTag.id.rawValue, in: body), value.count == PayloadID.byteCount,
                  let start = value.baseAddress, let base = body.baseAddress else { return -1 }
            return FrameHeader.size + (start - base)
        }
    }

    @discardableResult
    mutating func send(on connection: Connection, correlation: UInt32) -> Bool {
        bytes.withUnsafeMutableBytes { $0.storeBytes(of: correlation.bigEndian, toByteOffset: 4, as: UInt32.self) }
        return connection.write(bytes)
    }

    @discardableResult
    mutating func send(on connection: Connection, correlation: UInt32, id: PayloadID) -> Bool {
        let offset = idOffset
        bytes.withUnsafeMutableBytes { frame in
            frame.storeBytes(of: correlation.bigEndian, toByteOffset: 4, as: UInt32.self)
            if offset >= 0 {
                frame.storeBytes(of: id.high.bigEndian, toByteOffset: offset, as: UInt64.self)
                frame.storeBytes(of: id.low.bigEndian, toByteOffset: offset + 8, as: UInt64.self)
            }
        }
        return connection.write(bytes)
    }
}

/// Reads single fields out of a body without decoding the whole message: the replies
/// the bench counts need one field each (an id, a count), and the full decoder would
/// copy every field into arrays.
enum FieldScan {
    /// The value of the first field with `tag`, or nil if absent or the body is malformed.
    static func value(of tag: UInt8, in body: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        var offset = 0
        while offset < body.count {
            let fieldTag = body[offset]
            var length = 0
            var width = 0
            while true {
                guard width < 4, offset + 1 + width < body.count else { return nil }
                let byte = body[offset + 1 + width]
                length |= Int(byte & 0x7F) << (7 * width)
                width += 1
                if byte & 0x80 == 0 { break }
            }
            let start = offset + 1 + width
            guard length <= body.count - start else { return nil }
            if fieldTag == tag { return UnsafeRawBufferPointer(rebasing: body[start..<start + length]) }
            offset = start + length
        }
        return nil
    }

    static func uint32(of tag: UInt8, in body: UnsafeRawBufferPointer) -> UInt32? {
        guard let value = value(of: tag, in: body), value.count == 4 else { return nil }
        return UInt32(value[0]) << 24 | UInt32(value[1]) << 16 | UInt32(value[2]) << 8 | UInt32(value[3])
    }

    static func payloadID(in body: UnsafeRawBufferPointer) -> PayloadID? {
        value(of: FieldTag.id.rawValue, in: body).flatMap { PayloadID(bytes: $0) }
    }
}

/// DELIVERY_ACK frames, built for the one call that writes them: a device answers every
/// PUSH with one, so this is the bench's hottest send. A 16-byte id (every id securepush
/// issues) is laid out in five words on the stack: the header's two words with the
/// correlation patched in, then the `id` field. No array, no allocation, no runtime
/// exclusivity check; other id lengths go through the message encoder.
enum DeliveryAckFrame {
    /// Header word 0 without the correlation: magic, version, type, flags 0.
    private static let word0 = UInt64(FrameHeader.magic) << 56 | UInt64(FrameHeader.version) << 48
        | UInt64(MessageType.deliveryAck.rawValue) << 40
    /// Header word 1: status OK, reserved 0, body length (id tag, length byte, 16 bytes).
    private static let word1 = UInt64(2 + PayloadID.byteCount)
    /// Frame length with a 16-byte id.
    static let shortLength = FrameHeader.size + 2 + PayloadID.byteCount

    /// Calls `write` with the whole frame for `correlation` and `id`; the bytes are valid
    /// only during the call.
    @inline(__always)
    static func withFrame<R>(correlation: UInt32, id: UnsafeRawBufferPointer, _ write: (UnsafeRawBufferPointer) -> R) -> R {
        guard id.count == PayloadID.byteCount, let source = id.baseAddress else {
            return Message.deliveryAck(DeliveryAck(id: Array(id))).encoded(correlation: correlation).withUnsafeBytes(write)
        }
        var words: (UInt64, UInt64, UInt64, UInt64, UInt64) = (
            (word0 | UInt64(correlation)).bigEndian, word1.bigEndian, 0, 0, 0)
        return withUnsafeMutableBytes(of: &words) { frame in
            frame[FrameHeader.size] = FieldTag.id.rawValue
            frame[FrameHeader.size + 1] = UInt8(PayloadID.byteCount)
            (frame.baseAddress! + FrameHeader.size + 2).copyMemory(from: source, byteCount: PayloadID.byteCount)
            return write(UnsafeRawBufferPointer(rebasing: frame[..<shortLength]))
        }
    }
}
