/// Field encoding (SPEC.md section 3): tag u8, length as an unsigned LEB128 varint of at
/// most 4 bytes, then the value.
public enum Varint {
    /// The largest length a 4-byte varint can carry (2^28 - 1), above the 16 MiB ceiling.
    public static let maxEncodable = (1 << 28) - 1

    public static func append(_ value: Int, to out: inout [UInt8]) {
        precondition(value >= 0 && value <= maxEncodable, "field length out of range")
        var rest = value
        while rest >= 0x80 {
            out.append(UInt8(rest & 0x7F) | 0x80)
            rest >>= 7
        }
        out.append(UInt8(rest))
    }

    /// How many bytes `append` writes for `value`.
    public static func width(of value: Int) -> Int {
        var width = 1
        while value >> (7 * width) != 0 { width += 1 }
        return width
    }

    /// Decodes a varint at `offset`; returns the value and the number of bytes read.
    static func read(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws(WireError) -> (value: Int, width: Int) {
        var value = 0
        for index in 0..<4 {
            guard offset + index < bytes.count else { throw .truncatedField }
            let byte = bytes[offset + index]
            value |= Int(byte & 0x7F) << (7 * index)
            if byte & 0x80 == 0 { return (value, index + 1) }
        }
        throw .fieldLengthOverflow
    }
}

/// Appends fields to a body. Messages write their fields in ascending tag order ([3.4-1]).
public struct FieldWriter {
    public var bytes: [UInt8]

    public init(into bytes: [UInt8] = []) { self.bytes = bytes }

    /// Bytes one field takes on the wire with a value of `count` bytes: tag, length, value.
    public static func size(ofValue count: Int) -> Int {
        1 + Varint.width(of: count) + count
    }

    public mutating func append(_ tag: FieldTag, _ value: UInt8) { appendFixed(tag, value) }
    public mutating func append(_ tag: FieldTag, _ value: UInt16) { appendFixed(tag, value) }
    public mutating func append(_ tag: FieldTag, _ value: UInt32) { appendFixed(tag, value) }
    public mutating func append(_ tag: FieldTag, _ value: UInt64) { appendFixed(tag, value) }

    public mutating func append(_ tag: FieldTag, _ value: String) {
        var value = value
        value.withUTF8 { append(tag, UnsafeRawBufferPointer($0)) }
    }

    public mutating func append(_ tag: FieldTag, _ value: [UInt8]) {
        value.withUnsafeBytes { append(tag, $0) }
    }

    public mutating func append(_ tag: FieldTag, _ value: UnsafeRawBufferPointer) {
        bytes.append(tag.rawValue)
        Varint.append(value.count, to: &bytes)
        bytes.append(contentsOf: value)
    }

    public mutating func append(_ tag: FieldTag, _ value: PayloadID) {
        bytes.append(tag.rawValue)
        bytes.append(UInt8(PayloadID.byteCount))
        value.append(to: &bytes)
    }

    /// Writes nothing for nil, so optional fields stay off the wire.
    public mutating func append<T>(_ tag: FieldTag, ifPresent value: T?, _ write: (inout FieldWriter, FieldTag, T) -> Void) {
        if let value { write(&self, tag, value) }
    }

    private mutating func appendFixed<T: FixedWidthInteger>(_ tag: FieldTag, _ value: T) {
        bytes.append(tag.rawValue)
        bytes.append(UInt8(MemoryLayout<T>.size))
        bytes.appendBigEndian(value)
    }
}

/// The tags one message type reads (every tag of a message is below 128), written as an
/// array literal. Each tag's slot in a `FieldSet` is kept in four bits of a table indexed
/// by the tag, so finding it is a shift and a mask, not a search; and the table holds no
/// references, so a `FieldSet` copies without reference counting.
public struct FieldTable: ExpressibleByArrayLiteral, Sendable, Equatable {
    /// Slot + 1 of each listed tag, 16 tags to a word; 0 for a tag not listed.
    private var slots: InlineArray<8, UInt64>
    public let count: Int

    public init(_ tags: [FieldTag]) {
        precondition(tags.count <= FieldSet.capacity, "field tables hold at most \(FieldSet.capacity) fields")
        var slots = InlineArray<8, UInt64>(repeating: 0)
        for (slot, tag) in tags.enumerated() {
            precondition(tag.rawValue < 128, "field tables hold tags below 128")
            let (word, shift) = FieldTable.position(of: tag)
            precondition(slots[word] >> shift & 0xF == 0, "field tables list a tag once")
            slots[word] |= UInt64(slot + 1) << shift
        }
        self.slots = slots
        count = tags.count
    }

    public init(arrayLiteral tags: FieldTag...) { self.init(tags) }

    public static func == (lhs: FieldTable, rhs: FieldTable) -> Bool { lhs.tags == rhs.tags }

    /// The listed tags in the table's order.
    public var tags: [FieldTag] {
        var tags = [FieldTag](repeating: FieldTag(rawValue: 0), count: count)
        for raw in 0..<UInt8(128) {
            if let slot = slot(of: FieldTag(rawValue: raw)) { tags[slot] = FieldTag(rawValue: raw) }
        }
        return tags
    }

    public func contains(_ tag: FieldTag) -> Bool { slot(of: tag) != nil }

    @inline(__always)
    func slot(of tag: FieldTag) -> Int? {
        guard tag.rawValue < 128 else { return nil }
        let (word, shift) = FieldTable.position(of: tag)
        let stored = Int(truncatingIfNeeded: slots[word] >> shift & 0xF)
        return stored == 0 ? nil : stored - 1
    }

    @inline(__always)
    private static func position(of tag: FieldTag) -> (word: Int, shift: UInt64) {
        (Int(tag.rawValue >> 4), UInt64(tag.rawValue & 0xF) << 2)
    }
}

/// The fields of one body, scanned once and checked against a message's field table.
///
/// Only tags in `allowed` are recorded; every other tag is skipped ([3.4-2], [3.4-3]) unless the
/// message is `strict` (PUSH), where any other tag is an error. Values are views into the
/// body, so a FieldSet must not outlive it. It holds no references, so a copy costs no
/// reference counting.
public struct FieldSet {
    static let capacity = 14
    private let body: UnsafeRawBufferPointer
    private let allowed: FieldTable
    // Start and length of each allowed field, by its slot in `allowed`; -1 when absent.
    private var starts: InlineArray<14, Int32>
    private var lengths: InlineArray<14, Int32>

    public init(body: UnsafeRawBufferPointer, allowed: FieldTable, type: MessageType, strict: Bool = false) throws(WireError) {
        self.body = body
        self.allowed = allowed
        self.starts = InlineArray(repeating: -1)
        self.lengths = InlineArray(repeating: 0)
        var offset = 0
        while offset < body.count {
            let tag = FieldTag(rawValue: body[offset])
            let (length, width) = try Varint.read(body, at: offset + 1)
            let start = offset + 1 + width
            guard length <= body.count - start else { throw .truncatedField }
            offset = start + length
            guard let slot = allowed.slot(of: tag) else {
                if strict { throw .unexpectedField(tag: tag.rawValue, in: type) }
                continue
            }
            guard starts[slot] < 0 else { throw .duplicateField(tag) }
            try tag.check(UnsafeRawBufferPointer(rebasing: body[start..<start + length]))
            starts[slot] = Int32(start)
            lengths[slot] = Int32(length)
        }
    }

    private func value(_ tag: FieldTag) -> UnsafeRawBufferPointer? {
        guard let slot = allowed.slot(of: tag), starts[slot] >= 0 else { return nil }
        let start = Int(starts[slot])
        return UnsafeRawBufferPointer(rebasing: body[start..<start + Int(lengths[slot])])
    }

    public func contains(_ tag: FieldTag) -> Bool { value(tag) != nil }

    // MARK: optional accessors (nil when absent; types were checked during the scan)

    public func uint8(_ tag: FieldTag) -> UInt8? { value(tag).map { $0[0] } }
    public func uint16(_ tag: FieldTag) -> UInt16? { value(tag).map { $0.loadBigEndianUInt16(at: 0) } }
    public func uint32(_ tag: FieldTag) -> UInt32? { value(tag).map { $0.loadBigEndianUInt32(at: 0) } }
    public func uint64(_ tag: FieldTag) -> UInt64? { value(tag).map { $0.loadBigEndianUInt64(at: 0) } }
    public func bytes(_ tag: FieldTag) -> [UInt8]? { value(tag).map { Array($0) } }
    public func string(_ tag: FieldTag) -> String? { value(tag).map { String(decoding: $0, as: UTF8.self) } }

    public func payloadID(_ tag: FieldTag) throws(WireError) -> PayloadID? {
        guard let raw = value(tag) else { return nil }
        guard let id = PayloadID(bytes: raw) else { throw .badFieldValue(tag) }
        return id
    }

    /// An enumerated u8 whose legal values are `range`.
    public func uint8(_ tag: FieldTag, in range: ClosedRange<UInt8>) throws(WireError) -> UInt8? {
        guard let raw = uint8(tag) else { return nil }
        guard range.contains(raw) else { throw .badFieldValue(tag) }
        return raw
    }

    // MARK: required accessors

    /// `try fields.required(.user, FieldSet.string)`: the value, or missingField.
    /// Always inlined: otherwise the partial application `FieldSet.string` captures a
    /// copy of the whole set in a closure context for every field read.
    @inline(__always)
    public func required<T>(_ tag: FieldTag, _ read: (FieldSet) -> (FieldTag) -> T?) throws(WireError) -> T {
        guard let value = read(self)(tag) else { throw .missingField(tag) }
        return value
    }

    public func requiredPayloadID(_ tag: FieldTag = .id) throws(WireError) -> PayloadID {
        guard let id = try payloadID(tag) else { throw .missingField(tag) }
        return id
    }

    public func requiredUInt8(_ tag: FieldTag, in range: ClosedRange<UInt8>) throws(WireError) -> UInt8 {
        guard let value = try uint8(tag, in: range) else { throw .missingField(tag) }
        return value
    }
}

extension FieldSet {
    /// Every field of a body in wire order, known or not: for tests, tools and logs of
    /// malformed input, never the hot path.
    public static func listAll(in body: UnsafeRawBufferPointer) throws(WireError) -> [(tag: FieldTag, value: [UInt8])] {
        var fields: [(tag: FieldTag, value: [UInt8])] = []
        var offset = 0
        while offset < body.count {
            let (length, width) = try Varint.read(body, at: offset + 1)
            let start = offset + 1 + width
            guard length <= body.count - start else { throw .truncatedField }
            fields.append((FieldTag(rawValue: body[offset]), Array(body[start..<start + length])))
            offset = start + length
        }
        return fields
    }
}

extension FieldTag {
    /// The rule of this tag's values ([3.3-1], [3.3-8]): a fixed width, a length limit,
    /// UTF-8, no control character in a name. The one place it is written: the scan of every
    /// body applies it to each field, and a request built as a value (the HTTP API's JSON)
    /// is checked with it field by field (`SendRequest.validate`), so both forms of a
    /// request meet the same limits.
    @inline(__always)
    public func check(_ value: UnsafeRawBufferPointer) throws(WireError) {
        guard let type = valueType else { return }
        switch type {
        case .u8, .u16, .u32, .u64:
            guard value.count == type.width else { throw .badFieldValue(self) }
        case .bytes(let max):
            if let max, value.count > max { throw .fieldTooLong(self, max: max) }
        case .string(let max):
            guard value.count <= max else { throw .fieldTooLong(self, max: max) }
            guard FieldTag.isValidUTF8(value) else { throw .badFieldValue(self) }
        case .identifier(let max):
            guard value.count <= max else { throw .fieldTooLong(self, max: max) }
            // One pass for the ASCII names nearly all are; C1 controls only exist beyond it.
            var ascii = true
            var control = false
            for byte in value {
                ascii = ascii && byte < 0x80
                control = control || byte < 0x20 || byte == 0x7F
            }
            if !ascii {
                guard String(validating: value, as: UTF8.self) != nil else { throw .badFieldValue(self) }
                control = Identifier.controlCharacter(in: value) != nil
            }
            guard !control else { throw .controlCharacter(self) }
        }
    }

    /// `check` of a text value, as its UTF-8 would be written.
    public func check(_ value: String) throws(WireError) {
        var value = value
        try value.withUTF8 { bytes in Result { () throws(WireError) in try check(UnsafeRawBufferPointer(bytes)) } }.get()
    }

    /// `check` of a byte value.
    public func check(_ value: [UInt8]) throws(WireError) {
        try value.withUnsafeBytes { bytes in Result { () throws(WireError) in try check(bytes) } }.get()
    }

    /// ASCII, which nearly every name and key is, needs no decoding; the standard
    /// library's validation is generic and costs more than the rest of a PUSH's decode.
    private static func isValidUTF8(_ value: UnsafeRawBufferPointer) -> Bool {
        var ascii = true
        for byte in value { ascii = ascii && byte < 0x80 }
        return ascii || String(validating: value, as: UTF8.self) != nil
    }
}
