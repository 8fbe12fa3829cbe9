/// REGISTRY: a gateway asks the store for the changes to the device registry after
/// `cursor` (SPEC.md 4.16). With nothing to report the store may hold the request for up to
/// `waitMs`, so a revocation reaches the gateway as soon as it is made.
public struct RegistryRequest: WireMessage {
    public static let type = MessageType.registry
    public static let fieldTable: FieldTable = [.cursor, .limit, .waitMs]
    public static let defaultLimit: UInt32 = 200
    public static let maxLimit: UInt32 = 1000
    public static let maxWaitMs: UInt32 = 30_000

    public var cursor: UInt64
    public var limit: UInt32
    public var waitMs: UInt32

    public init(cursor: UInt64 = 0, limit: UInt32 = RegistryRequest.defaultLimit, waitMs: UInt32 = 0) {
        self.cursor = cursor
        self.limit = limit
        self.waitMs = waitMs
    }

    public init(fields: FieldSet) throws(WireError) {
        cursor = fields.uint64(.cursor) ?? 0
        limit = fields.uint32(.limit) ?? RegistryRequest.defaultLimit
        waitMs = fields.uint32(.waitMs) ?? 0
    }

    public func writeFields(to writer: inout FieldWriter) {
        if cursor != 0 { writer.append(.cursor, cursor) }
        if limit != RegistryRequest.defaultLimit { writer.append(.limit, limit) }
        if waitMs != 0 { writer.append(.waitMs, waitMs) }
    }
}

/// One change to the registry: a registration that is now enrolled or revoked.
public struct RegistryEntry: Equatable, Sendable {
    public enum State: UInt8, Sendable {
        case enrolled = 1
        case revoked = 2
    }

    public var state: State
    /// The signed registration credential (SPEC.md 7.4), exactly as the device presents it.
    public var credential: [UInt8]

    public init(state: State, credential: [UInt8]) {
        self.state = state
        self.credential = credential
    }

    /// The encoded size: state, length and credential.
    public var encodedCount: Int { 3 + credential.count }
}

/// REGISTRY_OK: the changes after the request's cursor, oldest first, and the cursor to ask
/// from next. `registrations` packs each entry as its state (u8), the credential's length
/// (u16, big-endian) and the credential.
public struct RegistryOK: WireMessage {
    public static let type = MessageType.registryOK
    public static let fieldTable: FieldTable = [.cursor, .hasMore, .registrations]
    /// Entries are registrations, which a HELLO limits to 896 bytes ([7.4-3]).
    public static let maxCredentialBytes = 1024

    public var entries: [RegistryEntry]
    public var cursor: UInt64
    public var hasMore: Bool

    public init(entries: [RegistryEntry], cursor: UInt64, hasMore: Bool) {
        self.entries = entries
        self.cursor = cursor
        self.hasMore = hasMore
    }

    public init(fields: FieldSet) throws(WireError) {
        cursor = try fields.required(.cursor, FieldSet.uint64)
        hasMore = try fields.requiredUInt8(.hasMore, in: 0...1) == 1
        let raw = try fields.required(.registrations, FieldSet.bytes)
        entries = []
        var offset = 0
        while offset < raw.count {
            guard raw.count - offset >= 3, let state = RegistryEntry.State(rawValue: raw[offset]) else {
                throw .badFieldValue(.registrations)
            }
            let length = Int(raw[offset + 1]) << 8 | Int(raw[offset + 2])
            let start = offset + 3
            guard length > 0, length <= RegistryOK.maxCredentialBytes, raw.count - start >= length else {
                throw .badFieldValue(.registrations)
            }
            entries.append(RegistryEntry(state: state, credential: Array(raw[start..<start + length])))
            offset = start + length
        }
    }

    public func writeFields(to writer: inout FieldWriter) {
        writer.append(.cursor, cursor)
        writer.append(.hasMore, UInt8(hasMore ? 1 : 0))
        var raw = [UInt8]()
        raw.reserveCapacity(entries.reduce(0) { $0 + $1.encodedCount })
        for entry in entries {
            raw.append(entry.state.rawValue)
            raw.append(UInt8(truncatingIfNeeded: entry.credential.count >> 8))
            raw.append(UInt8(truncatingIfNeeded: entry.credential.count))
            raw.append(contentsOf: entry.credential)
        }
        writer.append(.registrations, raw)
    }
}
