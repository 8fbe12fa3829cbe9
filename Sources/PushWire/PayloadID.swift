/// A store payload ID: 128 random bits, bound to one recipient (SPEC.md section 8).
/// Held as two integers so it is hashed and compared without touching the heap.
public struct PayloadID: Hashable, Sendable, CustomStringConvertible, Comparable {
    public static let byteCount = 16

    public var high: UInt64
    public var low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// Exactly 16 bytes, or nil.
    public init?(bytes: UnsafeRawBufferPointer) {
        guard bytes.count == PayloadID.byteCount else { return nil }
        self.init(high: bytes.loadBigEndianUInt64(at: 0), low: bytes.loadBigEndianUInt64(at: 8))
    }

    public init?(bytes: [UInt8]) {
        guard let id = bytes.withUnsafeBytes({ PayloadID(bytes: $0) }) else { return nil }
        self = id
    }

    /// 32 hex digits, the form the command line prints and reads.
    public init?(hex: String) {
        guard hex.utf8.count == 32, let high = UInt64(hex.prefix(16), radix: 16),
              let low = UInt64(hex.suffix(16), radix: 16) else { return nil }
        self.init(high: high, low: low)
    }

    /// A fresh ID from the system's random generator.
    public static func random() -> PayloadID {
        var generator = SystemRandomNumberGenerator()
        return PayloadID(high: generator.next(), low: generator.next())
    }

    public var bytes: [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(PayloadID.byteCount)
        append(to: &out)
        return out
    }

    public func append(to out: inout [UInt8]) {
        out.appendBigEndian(high)
        out.appendBigEndian(low)
    }

    public var hex: String {
        var digits: [UInt8] = []
        digits.reserveCapacity(2 * PayloadID.byteCount)
        appendHex(to: &digits)
        return String(decoding: digits, as: UTF8.self)
    }

    /// The 32 lowercase hex digits of `hex`, as ASCII bytes.
    public func appendHex(to out: inout [UInt8]) {
        for half in [high, low] {
            for shift in stride(from: 60, through: 0, by: -4) {
                let digit = UInt8(truncatingIfNeeded: half >> UInt64(shift)) & 0xF
                out.append(digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10)
            }
        }
    }

    public var description: String { hex }

    public static func < (lhs: PayloadID, rhs: PayloadID) -> Bool {
        (lhs.high, lhs.low) < (rhs.high, rhs.low)
    }
}
