import PushWire

/// A registration as the registry holds it (SPEC.md 4.16): one row per enrolment.
public struct RegistrationRecord: Sendable, Equatable {
    public var deviceID: String
    /// The user's name when it was enrolled (kept after the user is removed, for listing).
    public var user: String
    /// The internal identity it was enrolled for; tokens and LOGIN check it.
    public var userID: UInt64
    public var tags: [String]
    /// Unix ms, unique per device id: (deviceID, issuedAt) names a registration.
    public var issuedAt: UInt64
    public var expiresAt: UInt64
    public var state: RegistryEntry.State
    /// The number of its latest change; REGISTRY lists entries by it.
    public var changeSequence: UInt64
    /// When it was revoked (unix ms), if it was.
    public var revokedAt: UInt64?
    /// The signed registration exactly as the device presents it in HELLO.
    public var credential: [UInt8]

    package init(deviceID: String, user: String, userID: UInt64, tags: [String], issuedAt: UInt64, expiresAt: UInt64, state: RegistryEntry.State, changeSequence: UInt64, revokedAt: UInt64? = nil, credential: [UInt8]) {
        self.deviceID = deviceID
        self.user = user
        self.userID = userID
        self.tags = tags
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
        self.state = state
        self.changeSequence = changeSequence
        self.revokedAt = revokedAt
        self.credential = credential
    }

    public func isExpired(nowMs: UInt64) -> Bool { expiresAt <= nowMs }
}

/// What a running store needs of a device's enrolled registration: whose it is, the
/// span of time it covers and the id of its device key, if it has one (FETCH of a sealed
/// payload hands the stanza of that key, [4.19-4]; LOGIN commits nothing for the same key,
/// [4.6-5]).
public struct EnrolledDevice: Sendable, Equatable {
    public var userID: UInt64
    public var issuedAt: UInt64
    public var expiresAt: UInt64
    public var keyID: KeyID?

    public init(userID: UInt64, issuedAt: UInt64, expiresAt: UInt64, keyID: KeyID? = nil) {
        self.userID = userID
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
        self.keyID = keyID
    }
}

/// One page of REGISTRY: the entries after a cursor, oldest change first.
public struct RegistryPage: Sendable, Equatable {
    public var entries: [RegistryEntry]
    /// The change sequence number of the last entry, or the cursor asked from.
    public var cursor: UInt64
    public var hasMore: Bool

    public init(entries: [RegistryEntry], cursor: UInt64, hasMore: Bool) {
        self.entries = entries
        self.cursor = cursor
        self.hasMore = hasMore
    }
}

extension RegistryEntry.State {
    /// The state as the registry's SQL holds it, interpolated by name (`\(RegistryEntry.State.enrolled.sql)`):
    /// no statement of either backend spells a state as a bare number.
    package var sql: String { String(rawValue) }
}

/// How many changes after a cursor left a registration enrolled and how many revoked one.
public struct RegistryChangeCounts: Sendable, Equatable {
    public var enrolled: Int
    public var revoked: Int

    public init(enrolled: Int = 0, revoked: Int = 0) {
        self.enrolled = enrolled
        self.revoked = revoked
    }
}

extension RegistryPage {
    /// What a reply carries besides its entries: the frame header, `cursor`, `has_more`
    /// and the `registrations` tag and length, rounded up.
    package static let replyOverheadBytes = 48
}

/// A registration's row as both backends select it: these columns, in this order
/// (`RegistryTable.record`, `PostgresRegistryTable.record`), its tags joined by "\n".
package enum RegistryRow {
    package static let columns = """
        device_id, user_name, user_id, tags, issued_at, expires_at, state, change_seq, revoked_at, credential
        """

    /// A registration's tags as the `tags` column holds them: joined by "\n".
    package static func tags(_ column: String) -> [String] {
        column.isEmpty ? [] : column.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }
}
