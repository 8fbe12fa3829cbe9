/// Field tags of protocol v1 (SPEC.md section 3). The namespace is global: a tag has the
/// same meaning and value type in every message that carries it.
public struct FieldTag: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public enum ValueType: Sendable, Equatable {
        case u8, u16, u32, u64
        case bytes(max: Int?)
        case string(max: Int)
        /// A string that names something the protocol compares (a user, a device, a tag,
        /// a key): well-formed UTF-8 without a control character ([3.3-8]).
        case identifier(max: Int)

        /// Fixed width of an integer type, nil for variable-length values.
        public var width: Int? {
            switch self {
            case .u8: 1
            case .u16: 2
            case .u32: 4
            case .u64: 8
            case .bytes, .string, .identifier: nil
            }
        }
    }

    public static let role = FieldTag(rawValue: 0x01)
    public static let versionMin = FieldTag(rawValue: 0x02)
    public static let versionMax = FieldTag(rawValue: 0x03)
    public static let credential = FieldTag(rawValue: 0x04)
    public static let maxFrame = FieldTag(rawValue: 0x05)
    public static let keepaliveMs = FieldTag(rawValue: 0x06)
    public static let maxInflight = FieldTag(rawValue: 0x07)
    public static let version = FieldTag(rawValue: 0x08)
    public static let name = FieldTag(rawValue: 0x09)
    public static let message = FieldTag(rawValue: 0x0A)
    public static let lastCorrelation = FieldTag(rawValue: 0x0B)
    public static let user = FieldTag(rawValue: 0x10)
    public static let password = FieldTag(rawValue: 0x11)
    public static let deviceID = FieldTag(rawValue: 0x12)
    public static let token = FieldTag(rawValue: 0x13)
    public static let expiresAt = FieldTag(rawValue: 0x14)
    public static let id = FieldTag(rawValue: 0x15)
    public static let payload = FieldTag(rawValue: 0x16)
    public static let ttlSeconds = FieldTag(rawValue: 0x17)
    public static let readLimit = FieldTag(rawValue: 0x18)
    public static let cursor = FieldTag(rawValue: 0x19)
    public static let limit = FieldTag(rawValue: 0x1A)
    public static let ids = FieldTag(rawValue: 0x1B)
    public static let hasMore = FieldTag(rawValue: 0x1C)
    public static let state = FieldTag(rawValue: 0x1D)
    public static let fetchCount = FieldTag(rawValue: 0x1E)
    public static let fetchedAt = FieldTag(rawValue: 0x1F)
    public static let createdAt = FieldTag(rawValue: 0x20)
    public static let keySuite = FieldTag(rawValue: 0x21)
    public static let deviceKey = FieldTag(rawValue: 0x22)
    public static let keyID = FieldTag(rawValue: 0x23)
    public static let keys = FieldTag(rawValue: 0x24)
    public static let sealedPayload = FieldTag(rawValue: 0x25)
    public static let payloadToSeal = FieldTag(rawValue: 0x26)
    public static let targetKind = FieldTag(rawValue: 0x30)
    public static let target = FieldTag(rawValue: 0x31)
    public static let alert = FieldTag(rawValue: 0x32)
    public static let priority = FieldTag(rawValue: 0x33)
    public static let collapseKey = FieldTag(rawValue: 0x34)
    public static let written = FieldTag(rawValue: 0x35)
    public static let queued = FieldTag(rawValue: 0x36)
    public static let missedCount = FieldTag(rawValue: 0x37)
    public static let waitMs = FieldTag(rawValue: 0x38)
    public static let registrations = FieldTag(rawValue: 0x39)
    public static let pushTTLSeconds = FieldTag(rawValue: 0x3A)
    public static let once = FieldTag(rawValue: 0x3B)
    public static let idempotencyKey = FieldTag(rawValue: 0x3C)
    public static let pushState = FieldTag(rawValue: 0x3D)
    public static let replayed = FieldTag(rawValue: 0x3E)
    public static let olderCount = FieldTag(rawValue: 0x3F)
    // Inside signed credentials only (SPEC.md section 7), never in a message.
    public static let tags = FieldTag(rawValue: 0x40)
    public static let issuedAt = FieldTag(rawValue: 0x41)

    /// Name and value type of every known tag, indexed by raw value for the hot path.
    private static let table: [(name: String, type: ValueType)?] = {
        var table = [(name: String, type: ValueType)?](repeating: nil, count: 256)
        func define(_ tag: FieldTag, _ name: String, _ type: ValueType) { table[Int(tag.rawValue)] = (name, type) }
        define(.role, "role", .u8)
        define(.versionMin, "version_min", .u8)
        define(.versionMax, "version_max", .u8)
        define(.credential, "credential", .bytes(max: 1024))
        define(.maxFrame, "max_frame", .u32)
        define(.keepaliveMs, "keepalive_ms", .u32)
        define(.maxInflight, "max_inflight", .u32)
        define(.version, "version", .u8)
        define(.name, "name", .string(max: 64))
        define(.message, "message", .string(max: 1024))
        define(.lastCorrelation, "last_correlation", .u32)
        define(.user, "user", .identifier(max: 64))
        define(.password, "password", .bytes(max: 256))
        define(.deviceID, "device_id", .identifier(max: 64))
        define(.token, "token", .bytes(max: 512))
        define(.expiresAt, "expires_at", .u64)
        define(.id, "id", .bytes(max: 64))
        define(.payload, "payload", .bytes(max: nil))
        define(.ttlSeconds, "ttl_s", .u32)
        define(.readLimit, "read_limit", .u32)
        define(.cursor, "cursor", .u64)
        define(.limit, "limit", .u32)
        define(.ids, "ids", .bytes(max: nil))
        define(.hasMore, "has_more", .u8)
        define(.state, "state", .u8)
        define(.fetchCount, "fetch_count", .u32)
        define(.fetchedAt, "fetched_at", .u64)
        define(.createdAt, "created_at", .u64)
        define(.keySuite, "key_suite", .u8)
        define(.deviceKey, "device_key", .bytes(max: KeySuite.xwing.publicKeyCount))
        define(.keyID, "key_id", .bytes(max: KeyID.byteCount))
        define(.keys, "keys", .bytes(max: nil))
        define(.sealedPayload, "sealed_payload", .bytes(max: nil))
        define(.payloadToSeal, "payload_to_seal", .bytes(max: nil))
        define(.targetKind, "target_kind", .u8)
        define(.target, "target", .identifier(max: 64))
        define(.alert, "alert", .u8)
        define(.priority, "priority", .u8)
        define(.collapseKey, "collapse_key", .identifier(max: 64))
        define(.written, "written", .u32)
        define(.queued, "queued", .u32)
        define(.missedCount, "missed_count", .u32)
        define(.waitMs, "wait_ms", .u32)
        define(.registrations, "registrations", .bytes(max: nil))
        define(.pushTTLSeconds, "push_ttl_s", .u32)
        define(.once, "once", .u8)
        define(.idempotencyKey, "idempotency_key", .identifier(max: 128))
        define(.pushState, "push_state", .u8)
        define(.replayed, "replayed", .u8)
        define(.olderCount, "older_count", .u32)
        define(.tags, "tags", .bytes(max: 1024))
        define(.issuedAt, "issued_at", .u64)
        return table
    }()

    /// The value types alone, for the scan of every body: reading one from `table` copies
    /// the entry, name included, which costs a retain and a release per field.
    private static let valueTypes: [ValueType?] = table.map { $0?.type }

    /// Tags used only inside signed credentials are unknown in frame bodies ([3.2-2]).
    public var isCredentialOnly: Bool { self == .tags || self == .issuedAt }

    /// Known in a frame body.
    public var isKnown: Bool { FieldTag.table[Int(rawValue)] != nil && !isCredentialOnly }

    /// The name a listing of frame fields uses: `tag_0xNN` for a tag unknown in frames.
    public var frameName: String { isKnown ? name : unknownName }

    private var unknownName: String {
        let digits = String(rawValue, radix: 16)
        return "tag_0x" + (digits.count == 1 ? "0" + digits : digits)
    }
    public var valueType: ValueType? { FieldTag.valueTypes[Int(rawValue)] }
    public var name: String { FieldTag.table[Int(rawValue)]?.name ?? unknownName }
    public var description: String { name }

    public init?(name: String) {
        guard let index = FieldTag.table.firstIndex(where: { $0?.name == name }) else { return nil }
        self.init(rawValue: UInt8(index))
    }
}
