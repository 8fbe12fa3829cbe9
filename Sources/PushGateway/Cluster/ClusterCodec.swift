/// The byte layout of the messages gateway nodes send each other over NATS: unsigned
/// LEB128 integers and length-prefixed byte strings, in a fixed order per message, each
/// message starting with its version. Only nodes of one build read them, so there are no
/// tags; a message that does not parse is dropped and counted, never trusted in part.
struct ClusterWriter {
    private(set) var bytes: [UInt8] = []

    init(version: UInt8, reserving capacity: Int = 64) {
        bytes.reserveCapacity(capacity)
        bytes.append(version)
    }

    mutating func integer(_ value: UInt64) {
        var rest = value
        while rest >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: rest) | 0x80)
            rest >>= 7
        }
        bytes.append(UInt8(rest))
    }

    mutating func integer(_ value: Int) { integer(UInt64(max(0, value))) }
    mutating func integer(_ value: UInt32) { integer(UInt64(value)) }
    mutating func integer(_ value: UInt8) { bytes.append(value) }

    mutating func data(_ value: some Collection<UInt8>) {
        integer(value.count)
        bytes.append(contentsOf: value)
    }

    mutating func string(_ value: String) { data(value.utf8) }

    mutating func optionalString(_ value: String?) {
        if let value {
            bytes.append(1)
            string(value)
        } else {
            bytes.append(0)
        }
    }

    mutating func strings(_ values: [String]) {
        integer(values.count)
        for value in values { string(value) }
    }
}

/// Why a cluster message was dropped.
enum ClusterDecodeError: Error, Equatable {
    case truncated
    case unknownVersion(UInt8)
    case outOfRange
}

struct ClusterReader {
    private let bytes: [UInt8]
    private var offset = 0

    /// Reads the version byte and refuses any other than `version`.
    init(_ bytes: [UInt8], version: UInt8) throws(ClusterDecodeError) {
        self.bytes = bytes
        guard let first = bytes.first else { throw .truncated }
        guard first == version else { throw .unknownVersion(first) }
        offset = 1
    }

    var isAtEnd: Bool { offset == bytes.count }

    mutating func integer() throws(ClusterDecodeError) -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard offset < bytes.count else { throw .truncated }
            let byte = bytes[offset]
            offset += 1
            guard shift < 64 else { throw .outOfRange }
            value |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
    }

    mutating func uint32() throws(ClusterDecodeError) -> UInt32 {
        guard let value = UInt32(exactly: try integer()) else { throw .outOfRange }
        return value
    }

    mutating func uint8() throws(ClusterDecodeError) -> UInt8 {
        guard let value = UInt8(exactly: try integer()) else { throw .outOfRange }
        return value
    }

    /// A count of items that each take at least one byte, so a hostile count cannot make
    /// the reader reserve more than the message holds.
    mutating func count() throws(ClusterDecodeError) -> Int {
        let value = try integer()
        guard value <= UInt64(bytes.count - offset) else { throw .truncated }
        return Int(value)
    }

    mutating func data() throws(ClusterDecodeError) -> ArraySlice<UInt8> {
        let length = try count()
        defer { offset += length }
        return bytes[offset..<(offset + length)]
    }

    mutating func string() throws(ClusterDecodeError) -> String {
        String(decoding: try data(), as: UTF8.self)
    }

    mutating func optionalString() throws(ClusterDecodeError) -> String? {
        guard offset < bytes.count else { throw .truncated }
        let present = bytes[offset]
        offset += 1
        switch present {
        case 0: return nil
        case 1: return try string()
        default: throw .outOfRange
        }
    }

    mutating func strings() throws(ClusterDecodeError) -> [String] {
        let count = try count()
        var values: [String] = []
        values.reserveCapacity(count)
        for _ in 0..<count { values.append(try string()) }
        return values
    }
}
