/// The fixed 16-byte frame header of protocol v1 (SPEC.md section 2).
///
/// ```
/// 0 magic u8 | 1 version u8 | 2 type u8 | 3 flags u8 | 4 correlation u32
/// 8 status u16 | 10 reserved u16 | 12 length u32 (body bytes)
/// ```
public struct FrameHeader: Equatable, Sendable {
    public static let size = 16
    public static let magic: UInt8 = 0xA7
    public static let version: UInt8 = 1

    /// Raw type byte: unknown types still frame correctly and are skipped whole.
    public var rawType: UInt8
    public var flags: UInt8
    public var correlation: UInt32
    public var status: Status
    public var bodyLength: UInt32

    public init(type: MessageType, correlation: UInt32, status: Status = .ok, bodyLength: UInt32 = 0) {
        self.rawType = type.rawValue
        self.flags = 0
        self.correlation = correlation
        self.status = status
        self.bodyLength = bodyLength
    }

    public init(rawType: UInt8, flags: UInt8 = 0, correlation: UInt32, status: Status, bodyLength: UInt32) {
        self.rawType = rawType
        self.flags = flags
        self.correlation = correlation
        self.status = status
        self.bodyLength = bodyLength
    }

    public var type: MessageType? { MessageType(rawValue: rawType) }
    public var frameLength: Int { FrameHeader.size + Int(bodyLength) }

    /// Parses and validates a header from the first 16 bytes of `bytes`.
    ///
    /// Every check that can be made from the header alone happens here, before any body
    /// byte is read, so an oversized length is refused without allocating ([2-7]).
    public static func parse(_ bytes: UnsafeRawBufferPointer, maxFrame: Int) throws(WireError) -> FrameHeader {
        precondition(bytes.count >= size, "caller passes at least a whole header")
        guard bytes[0] == magic else { throw .badMagic(bytes[0]) }
        guard bytes[1] == version else { throw .unsupportedVersion(bytes[1]) }
        let flags = bytes[3]
        guard flags == 0 else { throw .reservedBitsSet }
        guard bytes[10] == 0, bytes[11] == 0 else { throw .reservedBitsSet }
        let length = bytes.loadBigEndianUInt32(at: 12)
        guard UInt64(length) + UInt64(size) <= UInt64(maxFrame) else {
            throw .frameTooLarge(length: length, max: maxFrame)
        }
        return FrameHeader(
            rawType: bytes[2], flags: flags,
            correlation: bytes.loadBigEndianUInt32(at: 4),
            status: Status(rawValue: bytes.loadBigEndianUInt16(at: 8)),
            bodyLength: length)
    }

    public func write(into out: inout [UInt8]) {
        // Two words in one append: this runs for every frame sent, and an append per
        // field costs several times as much.
        var words = (
            (UInt64(FrameHeader.magic) << 56 | UInt64(FrameHeader.version) << 48 | UInt64(rawType) << 40
                | UInt64(flags) << 32 | UInt64(correlation)).bigEndian,
            (UInt64(status.rawValue) << 48 | UInt64(bodyLength)).bigEndian)
        withUnsafeBytes(of: &words) { out.append(contentsOf: $0) }
    }
}

/// Frame size limits ([2-8]).
public enum FrameLimits {
    /// In force until HELLO_OK settles another value.
    public static let defaultMaxFrame = 64 * 1024
    /// No negotiation may go above this.
    public static let ceiling = 16 * 1024 * 1024
    /// No negotiation may go below this.
    public static let floor = 1024
}

extension UnsafeRawBufferPointer {
    @inline(__always)
    func loadBigEndianUInt16(at offset: Int) -> UInt16 {
        UInt16(self[offset]) << 8 | UInt16(self[offset + 1])
    }

    @inline(__always)
    func loadBigEndianUInt32(at offset: Int) -> UInt32 {
        UInt32(self[offset]) << 24 | UInt32(self[offset + 1]) << 16
            | UInt32(self[offset + 2]) << 8 | UInt32(self[offset + 3])
    }

    @inline(__always)
    func loadBigEndianUInt64(at offset: Int) -> UInt64 {
        UInt64(loadBigEndianUInt32(at: offset)) << 32 | UInt64(loadBigEndianUInt32(at: offset + 4))
    }
}

extension Array where Element == UInt8 {
    /// Byte by byte: for two to eight bytes this is cheaper than `append(contentsOf:)`.
    @inline(__always)
    mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        for shift in stride(from: T.bitWidth - 8, through: 0, by: -8) {
            append(UInt8(truncatingIfNeeded: value >> shift))
        }
    }
}
