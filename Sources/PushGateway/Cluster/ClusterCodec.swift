import PushWire

/// The byte layout of what gateway nodes send each other over NATS and keep in JetStream
/// (protocol/CLUSTER.md). Offline queue records outlive the process that wrote them and
/// nodes of two builds share a cluster during a rolling upgrade, so the layout is tagged:
///
///     version (u8) | body length (u32, big-endian) | fields
///
/// Each field is laid out as a protocol body field (SPEC.md 3.1): a one-byte tag, its
/// length as a varint of 1 to 4 bytes, then the value. An integer's value is big-endian
/// in the fewest bytes (none for 0, at most 8), a list is its field repeated, and a
/// nested message's value is its own fields.
///
/// What is promised: new fields may be added to any message in a later build; a reader
/// skips tags it does not know and takes a missing field as its default (0, empty, none),
/// so old and new builds read each other. Only a change an old reader must not
/// misread (a field's meaning or type changed, a required field added or removed) bumps
/// `ClusterMessages.version`; a reader refuses every other version as a whole, and its
/// caller counts the message as malformed and drops it, never trusting it in part.
struct ClusterWriter {
    private var bytes: [UInt8] = []

    static let headerSize = 5

    init(reserving capacity: Int = 64) {
        bytes.reserveCapacity(capacity)
        bytes.append(ClusterMessages.version)
        bytes.append(contentsOf: repeatElement(0, count: 4))
    }

    /// The finished message: the body length written into the header.
    mutating func finish() -> [UInt8] {
        let length = UInt32(truncatingIfNeeded: bytes.count - ClusterWriter.headerSize)
        bytes[1] = UInt8(truncatingIfNeeded: length >> 24)
        bytes[2] = UInt8(truncatingIfNeeded: length >> 16)
        bytes[3] = UInt8(truncatingIfNeeded: length >> 8)
        bytes[4] = UInt8(truncatingIfNeeded: length)
        return bytes
    }

    mutating func integer(_ tag: ClusterTag, _ value: UInt64) {
        let width = (UInt64.bitWidth - value.leadingZeroBitCount + 7) / 8
        bytes.append(tag.rawValue)
        bytes.append(UInt8(width))
        var shift = width * 8
        while shift > 0 {
            shift -= 8
            bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
        }
    }

    mutating func integer(_ tag: ClusterTag, _ value: Int) { integer(tag, UInt64(max(0, value))) }
    mutating func integer(_ tag: ClusterTag, _ value: UInt32) { integer(tag, UInt64(value)) }
    mutating func integer(_ tag: ClusterTag, _ value: UInt8) { integer(tag, UInt64(value)) }
    mutating func flag(_ tag: ClusterTag, _ value: Bool) { integer(tag, UInt64(value ? 1 : 0)) }

    mutating func data(_ tag: ClusterTag, _ value: some Collection<UInt8>) {
        bytes.append(tag.rawValue)
        Varint.append(value.count, to: &bytes)
        bytes.append(contentsOf: value)
    }

    mutating func string(_ tag: ClusterTag, _ value: String) { data(tag, value.utf8) }

    /// One field per value.
    mutating func strings(_ tag: ClusterTag, _ values: [String]) {
        for value in values { string(tag, value) }
    }

    /// A field whose value is the fields `write` appends. Its length is known only once
    /// they are written: one byte is set aside for it, and the rare value of 128 bytes or
    /// more is moved up by the bytes a longer length needs.
    mutating func nested(_ tag: ClusterTag, _ write: (inout ClusterWriter) -> Void) {
        bytes.append(tag.rawValue)
        let lengthAt = bytes.count
        bytes.append(0)
        write(&self)
        let length = bytes.count - lengthAt - 1
        let width = Varint.width(of: length)
        if width > 1 {
            bytes.insert(contentsOf: repeatElement(0, count: width - 1), at: lengthAt + 1)
        }
        var rest = length
        for index in 0..<width {
            bytes[lengthAt + index] = UInt8(truncatingIfNeeded: rest & 0x7F) | (index < width - 1 ? 0x80 : 0)
            rest >>= 7
        }
    }
}

/// Why a cluster message was dropped.
enum ClusterDecodeError: Error, Equatable {
    case truncated
    case unknownVersion(UInt8)
    case outOfRange
    case missingField(ClusterTag)
}

/// The fields of one message, or of one nested message, read in order. They are views
/// into the message's bytes, valid only inside `ClusterFields.read`, so reading costs no
/// reference counting; nothing is allocated for a length beyond the bytes present.
struct ClusterFields {
    private let bytes: UnsafeBufferPointer<UInt8>
    private var offset = 0

    /// `read` applied to the fields of a whole message of the current version.
    static func read<T>(_ message: [UInt8], _ read: (ClusterFields) throws(ClusterDecodeError) -> T) throws(ClusterDecodeError) -> T {
        try message.withUnsafeBufferPointer { (message) throws(ClusterDecodeError) -> T in
            guard let version = message.first else { throw .truncated }
            guard version == ClusterMessages.version else { throw .unknownVersion(version) }
            guard message.count >= ClusterWriter.headerSize else { throw .truncated }
            let length = message[1..<ClusterWriter.headerSize].reduce(0) { $0 << 8 | Int($1) }
            // A message cut short, or with bytes after its body, is not what was written.
            guard length == message.count - ClusterWriter.headerSize else { throw .truncated }
            return try read(ClusterFields(UnsafeBufferPointer(rebasing: message[ClusterWriter.headerSize...])))
        }
    }

    fileprivate init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    /// The next field, or nil at the end.
    mutating func next() throws(ClusterDecodeError) -> ClusterField? {
        guard offset < bytes.count else { return nil }
        let tag = ClusterTag(rawValue: bytes[offset])
        offset += 1
        var length = 0
        for index in 0..<4 {
            guard offset < bytes.count else { throw .truncated }
            let byte = bytes[offset]
            offset += 1
            length |= Int(byte & 0x7F) << (7 * index)
            if byte & 0x80 == 0 { break }
            // A fourth length byte with its top bit set ([3.1-3] for protocol bodies).
            if index == 3 { throw .outOfRange }
        }
        guard length <= bytes.count - offset else { throw .truncated }
        defer { offset += length }
        return ClusterField(tag: tag, value: UnsafeBufferPointer(rebasing: bytes[offset..<(offset + length)]))
    }

    /// How many of the remaining fields carry `tag`: what a list of them may reserve,
    /// never more than the bytes present hold.
    func count(of tag: ClusterTag) throws(ClusterDecodeError) -> Int {
        var rest = self
        var count = 0
        while let field = try rest.next() {
            if field.tag == tag { count += 1 }
        }
        return count
    }
}

/// One field as it lies in a message.
struct ClusterField {
    let tag: ClusterTag
    let value: UnsafeBufferPointer<UInt8>

    func integer() throws(ClusterDecodeError) -> UInt64 {
        guard value.count <= 8 else { throw .outOfRange }
        var integer: UInt64 = 0
        for byte in value { integer = integer << 8 | UInt64(byte) }
        return integer
    }

    func uint32() throws(ClusterDecodeError) -> UInt32 {
        guard let value = UInt32(exactly: try integer()) else { throw .outOfRange }
        return value
    }

    func uint8() throws(ClusterDecodeError) -> UInt8 {
        guard let value = UInt8(exactly: try integer()) else { throw .outOfRange }
        return value
    }

    func flag() throws(ClusterDecodeError) -> Bool { try integer() != 0 }

    var data: [UInt8] { Array(value) }
    var string: String { String(decoding: value, as: UTF8.self) }
    /// The fields of a nested message.
    var fields: ClusterFields { ClusterFields(value) }
}

extension Optional {
    /// The value of a field a message cannot do without.
    func required(_ tag: ClusterTag) throws(ClusterDecodeError) -> Wrapped {
        guard let self else { throw .missingField(tag) }
        return self
    }
}
