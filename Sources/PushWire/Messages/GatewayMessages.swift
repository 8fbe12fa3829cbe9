/// Whom a provider's PUSH is for.
public enum PushTarget: Equatable, Hashable, Sendable, CustomStringConvertible {
    case device(String)
    case user(String)
    case tag(String)

    public var kind: UInt8 {
        switch self {
        case .device: 1
        case .user: 2
        case .tag: 3
        }
    }

    public var name: String {
        switch self {
        case .device(let name), .user(let name), .tag(let name): name
        }
    }

    public init?(kind: UInt8, name: String) {
        switch kind {
        case 1: self = .device(name)
        case 2: self = .user(name)
        case 3: self = .tag(name)
        default: return nil
        }
    }

    /// `device:ID`, `user:NAME` or `tag:T`, as the command line writes a target.
    public init?(parsing text: String) {
        guard let colon = text.firstIndex(of: ":") else { return nil }
        let name = String(text[text.index(after: colon)...])
        guard !name.isEmpty, name.utf8.count <= 64 else { return nil }
        switch text[..<colon] {
        case "device": self = .device(name)
        case "user": self = .user(name)
        case "tag": self = .tag(name)
        default: return nil
        }
    }

    public var description: String {
        switch self {
        case .device(let name): "device:\(name)"
        case .user(let name): "user:\(name)"
        case .tag(let name): "tag:\(name)"
        }
    }
}

/// PUSH: the notification ID and delivery options, and deliberately nothing else.
///
/// From a provider it names a target; from the gateway to a device it does not. Any field
/// outside this table is refused rather than skipped, so no payload can ride the push path.
public struct Push: WireMessage {
    public static let type = MessageType.push
    public static let fieldTable: FieldTable = [.user, .id, .ttlSeconds, .targetKind, .target, .alert, .priority, .collapseKey, .once]
    public static let rejectsUnlistedFields = true
    public static let defaultPriority: UInt8 = 5
    public static let maxPriority: UInt8 = 10
    public static let defaultTTLSeconds: UInt32 = 86_400

    public var target: PushTarget?
    /// Opaque to the gateway: 1 to 64 bytes, in practice a store payload ID.
    public var id: [UInt8]
    public var alert: Bool
    public var priority: UInt8
    public var collapseKey: String?
    public var ttlSeconds: UInt32
    /// Only this user's devices match ([4.13-11]).
    public var user: String?
    /// A later PUSH of this id with `once` is the same push ([4.13-12]).
    public var once: Bool

    public init(target: PushTarget?, id: [UInt8], alert: Bool = false, priority: UInt8 = Push.defaultPriority,
                collapseKey: String? = nil, ttlSeconds: UInt32 = Push.defaultTTLSeconds, user: String? = nil, once: Bool = false) {
        self.target = target
        self.id = id
        self.alert = alert
        self.priority = priority
        self.collapseKey = collapseKey
        self.ttlSeconds = ttlSeconds
        self.user = user
        self.once = once
    }

    public init(fields: FieldSet) throws(WireError) {
        // The checks first, so a malformed PUSH allocates nothing.
        let alert = try fields.uint8(.alert, in: 0...1) == 1
        let priority = try fields.uint8(.priority, in: 0...Push.maxPriority) ?? Push.defaultPriority
        let once = try fields.uint8(.once, in: 0...1) == 1
        let target = try fields.pushTarget()
        guard let id = fields.bytes(.id) else { throw .missingField(.id) }
        guard !id.isEmpty else { throw .badFieldValue(.id) }
        self.init(target: target, id: id, alert: alert, priority: priority, collapseKey: fields.string(.collapseKey),
                  ttlSeconds: fields.uint32(.ttlSeconds) ?? Push.defaultTTLSeconds, user: fields.string(.user), once: once)
    }

    public func writeFields(to writer: inout FieldWriter) {
        if let user { writer.append(.user, user) }
        writer.append(.id, id)
        if ttlSeconds != Push.defaultTTLSeconds { writer.append(.ttlSeconds, ttlSeconds) }
        if let target {
            writer.append(.targetKind, target.kind)
            writer.append(.target, target.name)
        }
        if alert { writer.append(.alert, UInt8(1)) }
        if priority != Push.defaultPriority { writer.append(.priority, priority) }
        if let collapseKey { writer.append(.collapseKey, collapseKey) }
        if once { writer.append(.once, UInt8(1)) }
    }

    /// The form the gateway writes to a device: id, alert, priority and collapse key only
    /// ([4.14-1]); the target, the user, `once` and the queueing TTL stay at the gateway.
    public var forDevice: Push {
        var copy = self
        copy.target = nil
        copy.ttlSeconds = Push.defaultTTLSeconds
        copy.user = nil
        copy.once = false
        return copy
    }

    /// The whole PUSH frame of `forDevice`, the same bytes `Message.push(forDevice)`
    /// encodes to, in one allocation of the exact size: the gateway builds one per push
    /// and keeps it until every device acknowledged it.
    public func deviceFrame(correlation: UInt32) -> [UInt8] {
        let bodyLength = FieldWriter.size(ofValue: id.count)
            + (alert ? FieldWriter.size(ofValue: 1) : 0)
            + (priority != Push.defaultPriority ? FieldWriter.size(ofValue: 1) : 0)
            + (collapseKey.map { FieldWriter.size(ofValue: $0.utf8.count) } ?? 0)
        let total = FrameHeader.size + bodyLength
        // The closure below takes these and not `self`, which it would copy whole.
        let (id, alert, priority, collapseKey) = (id, alert, priority, collapseKey)
        // Put together on the stack and copied into the array once: an append per field
        // checks uniqueness and capacity each time, and this runs once per push. (An array
        // written in place costs more: its uninitialized allocation is not specialized.)
        return withUnsafeTemporaryAllocation(byteCount: total, alignment: 8) { buffer in
            var out = ByteCursor(buffer)
            out.putBigEndian(UInt64(FrameHeader.magic) << 56 | UInt64(FrameHeader.version) << 48
                | UInt64(MessageType.push.rawValue) << 40 | UInt64(correlation))
            out.putBigEndian(UInt64(bodyLength))  // status OK (0), reserved 0, length
            id.withUnsafeBytes { out.put(.id, $0) }
            if alert { out.put(.alert, byte: 1) }
            if priority != Push.defaultPriority { out.put(.priority, byte: priority) }
            if var key = collapseKey { key.withUTF8 { out.put(.collapseKey, UnsafeRawBufferPointer($0)) } }
            precondition(out.offset == total, "deviceFrame's size and fields disagree")
            return [UInt8](UnsafeRawBufferPointer(buffer))
        }
    }
}

/// PUSH_ACK: how many devices a PUSH was written to and how many it was queued for.
public struct PushAck: WireMessage {
    public static let type = MessageType.pushAck
    public static let fieldTable: FieldTable = [.written, .queued]

    public var written: UInt32
    public var queued: UInt32

    public init(written: UInt32, queued: UInt32) {
        self.written = written
        self.queued = queued
    }

    public init(fields: FieldSet) throws(WireError) {
        written = try fields.required(.written, FieldSet.uint32)
        queued = try fields.required(.queued, FieldSet.uint32)
    }

    public func writeFields(to writer: inout FieldWriter) {
        writer.append(.written, written)
        writer.append(.queued, queued)
    }

    /// Appends the whole frame, the same bytes `Message.pushAck(self)` encodes to, in two
    /// appends: a gateway answers every PUSH with one, and the generic path copies the
    /// `Message` and appends field by field.
    public func encode(correlation: UInt32, into out: inout [UInt8]) {
        FrameHeader(type: .pushAck, correlation: correlation, bodyLength: 12).write(into: &out)
        // Two u32 fields: tag, length 4, value, each.
        var body = (
            (UInt64(FieldTag.written.rawValue) << 56 | 4 << 48 | UInt64(written) << 16
                | UInt64(FieldTag.queued.rawValue) << 8 | 4).bigEndian,
            queued.bigEndian)
        withUnsafeBytes(of: &body) { out.append(contentsOf: $0) }
    }
}

/// DELIVERY_ACK: a device confirms a PUSH; unconfirmed pushes are delivered again.
public struct DeliveryAck: WireMessage {
    public static let type = MessageType.deliveryAck
    public static let fieldTable: FieldTable = [.id]

    public var id: [UInt8]

    public init(id: [UInt8]) { self.id = id }

    public init(fields: FieldSet) throws(WireError) {
        id = try fields.required(.id, FieldSet.bytes)
    }

    public func writeFields(to writer: inout FieldWriter) { writer.append(.id, id) }
}

/// MISSED: the gateway dropped pushes for this device; it should SYNC with the store.
public struct Missed: WireMessage {
    public static let type = MessageType.missed
    public static let fieldTable: FieldTable = [.missedCount]

    public var missedCount: UInt32

    public init(missedCount: UInt32) { self.missedCount = missedCount }

    public init(fields: FieldSet) throws(WireError) {
        missedCount = try fields.required(.missedCount, FieldSet.uint32)
    }

    public func writeFields(to writer: inout FieldWriter) { writer.append(.missedCount, missedCount) }
}

/// Writes a frame of known size into a buffer of exactly that size (see `Push.deviceFrame`).
private struct ByteCursor {
    let buffer: UnsafeMutableRawBufferPointer
    var offset = 0

    init(_ buffer: UnsafeMutableRawBufferPointer) { self.buffer = buffer }

    mutating func put(_ byte: UInt8) {
        buffer.storeBytes(of: byte, toByteOffset: offset, as: UInt8.self)
        offset += 1
    }

    mutating func putBigEndian(_ word: UInt64) {
        buffer.storeBytes(of: word.bigEndian, toByteOffset: offset, as: UInt64.self)
        offset += 8
    }

    /// A field: tag, varint length, value.
    mutating func put(_ tag: FieldTag, _ value: UnsafeRawBufferPointer) {
        put(tag.rawValue)
        var rest = value.count
        while rest >= 0x80 {
            put(UInt8(rest & 0x7F) | 0x80)
            rest >>= 7
        }
        put(UInt8(rest))
        UnsafeMutableRawBufferPointer(rebasing: buffer[offset..<offset + value.count]).copyMemory(from: value)
        offset += value.count
    }

    mutating func put(_ tag: FieldTag, byte: UInt8) {
        put(tag.rawValue)
        put(1)
        put(byte)
    }
}

extension FieldSet {
    /// `target_kind` and `target`, which come together or not at all (4.13-1): nil when
    /// neither is there.
    func pushTarget() throws(WireError) -> PushTarget? {
        let kind = try uint8(.targetKind, in: 1...3)
        let name = string(.target)
        switch (kind, name) {
        case (nil, nil): return nil
        case (let kind?, let name?): return PushTarget(kind: kind, name: name)
        case (nil, _): throw .missingField(.targetKind)
        case (_, nil): throw .missingField(.target)
        }
    }
}
