import PushWire

/// Hand-built frames and fields. The cases need frames the codec would never write
/// (padded varints, fields out of order, bad headers), so they are assembled byte by
/// byte here rather than through `Message.encode`.
enum RawFrame {
    /// A 16-byte header with every byte under the caller's control.
    static func header(type: UInt8, correlation: UInt32, status: UInt16 = 0, length: UInt32,
                       magic: UInt8 = FrameHeader.magic, version: UInt8 = FrameHeader.version,
                       flags: UInt8 = 0, reserved: UInt16 = 0) -> [UInt8] {
        [magic, version, type, flags] + bigEndian(correlation) + bigEndian(status) + bigEndian(reserved) + bigEndian(length)
    }

    /// A header and a body whose length the header states truthfully.
    static func frame(type: UInt8, correlation: UInt32, status: UInt16 = 0, body: [UInt8] = []) -> [UInt8] {
        header(type: type, correlation: correlation, status: status, length: UInt32(body.count)) + body
    }

    static func frame(_ type: MessageType, correlation: UInt32, status: Status = .ok, body: [UInt8] = []) -> [UInt8] {
        frame(type: type.rawValue, correlation: correlation, status: status.rawValue, body: body)
    }

    /// One field: tag, varint length (padded to `lengthBytes` when given), value.
    static func field(_ tag: UInt8, _ value: [UInt8], lengthBytes: Int? = nil) -> [UInt8] {
        [tag] + varint(value.count, width: lengthBytes) + value
    }

    static func field(_ tag: FieldTag, _ value: [UInt8], lengthBytes: Int? = nil) -> [UInt8] {
        field(tag.rawValue, value, lengthBytes: lengthBytes)
    }

    static func field(_ tag: FieldTag, string: String) -> [UInt8] {
        field(tag.rawValue, Array(string.utf8))
    }

    /// LEB128, in the fewest bytes or padded with continuation bits to `width` bytes
    /// (for example 5 in two bytes is `85 00`), which receivers must accept ([3.1-4]).
    static func varint(_ value: Int, width: Int? = nil) -> [UInt8] {
        var minimal = 1
        while minimal < 4 && value >> (7 * minimal) != 0 { minimal += 1 }
        let count = max(minimal, min(width ?? minimal, 4))
        return (0..<count).map { index in
            let group = UInt8((value >> (7 * index)) & 0x7F)
            return index < count - 1 ? group | 0x80 : group
        }
    }

    static func bigEndian<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        (0..<MemoryLayout<T>.size).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
    }

    /// A HELLO body from the fields given, in the order given.
    static func helloBody(role: UInt8 = 1, extra: [UInt8] = []) -> [UInt8] {
        field(.role, [role]) + field(.versionMin, [1]) + field(.versionMax, [1]) + extra
    }

    /// The correlation id in a raw frame's header, or nil when it is shorter than 8 bytes.
    static func correlation(of bytes: [UInt8]) -> UInt32? {
        guard bytes.count >= 8 else { return nil }
        return bytes[4..<8].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }

    /// Filler of an unknown tag (0x7e) that makes a body exactly `bytes` long, so a frame
    /// can be sized to a limit; nil when `bytes` is too small to hold a field.
    static func padding(toLength bytes: Int) -> [UInt8]? {
        for width in 1...4 {
            let value = bytes - 1 - width
            if value >= 0, varint(value).count <= width {
                return field(0x7E, [UInt8](repeating: 0x2E, count: value), lengthBytes: width)
            }
        }
        return nil
    }
}
