/// Queue records in the untagged layout of builds before the tagged one (version 1):
/// JetStream keeps them across an upgrade, so they stay readable; nothing writes them.
/// The fields follow in a fixed order, integers as unsigned LEB128, byte strings after
/// their length, a missing collapse key as a 0 byte (1 and the string when present):
///
///     1 | user | enrolment | missed | count | count × (frame body | priority |
///         collapse key | expires at | returned | rank)
extension QueueRecord {
    init(decodingUntagged bytes: [UInt8]) throws(ClusterDecodeError) {
        var reader = try UntaggedReader(bytes)
        let user = try reader.string()
        let enrolment = try reader.integer()
        let missed = try reader.uint32()
        let count = try reader.count()
        var entries: [Entry] = []
        entries.reserveCapacity(count)
        for _ in 0..<count {
            let push = ClusterPush(frameBody: Array(try reader.data()), priority: try reader.uint8(),
                                   collapseKey: try reader.optionalString(), expiresAtWallMs: try reader.integer())
            let returned = try reader.uint8() != 0
            entries.append(Entry(push: push, returned: returned, rank: try reader.uint32()))
        }
        guard reader.isAtEnd else { throw .outOfRange }
        self.init(user: user, enrolment: enrolment, missed: missed, entries: entries)
    }
}

private struct UntaggedReader {
    private let bytes: [UInt8]
    private var offset = 1

    init(_ bytes: [UInt8]) throws(ClusterDecodeError) {
        guard let version = bytes.first else { throw .truncated }
        guard version == ClusterMessages.untaggedVersion else { throw .unknownVersion(version) }
        self.bytes = bytes
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
    /// the reader reserve more than the record holds.
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
}
