import PushSecurity

/// What `securepush user remove` took away.
public struct RemovedUser: Sendable, Equatable {
    public var name: String
    public var id: UInt64
    /// Payload rows deleted with the user, gone ones included.
    public var payloads: Int
    /// Its device registrations that were enrolled and are now revoked.
    public var registrations: Int

    package init(name: String, id: UInt64, payloads: Int, registrations: Int) {
        self.name = name
        self.id = id
        self.payloads = payloads
        self.registrations = registrations
    }
}

/// One line of `securepush user list`.
public struct UserSummary: Sendable, Equatable {
    public var name: String
    public var createdAt: UInt64
    /// Payloads still readable: not expired, recalled or read out.
    public var livePayloads: Int

    package init(name: String, createdAt: UInt64, livePayloads: Int) {
        self.name = name
        self.createdAt = createdAt
        self.livePayloads = livePayloads
    }
}

/// The removal fence: the instant before which a token for a removed user's name may
/// have been issued to that user.
package enum UserRemoval {
    /// How long after a removal's commit a store could still issue a token to the removed
    /// user: it read the clock before its check of the users, which missed the commit.
    package static let fenceMs: UInt64 = 1_000

    /// The removal fence after a removal at `nowMs`: `fenceMs` past it, never moved
    /// back from the fence `held` (a removal made with a clock behind an earlier one's).
    /// Decided here for both backends, which store the value.
    package static func fence(afterRemovalAt nowMs: UInt64, held: UInt64) -> UInt64 {
        let (fence, overflow) = nowMs.addingReportingOverflow(fenceMs)
        return max(held, overflow ? .max : fence)
    }
}

/// Internal user identities.
package enum UserIdentity {
    /// A random positive 63-bit id; 0 is never used.
    package static func newID() throws(StoreBackendError) -> UInt64 {
        guard let bytes = try? SecureRandom.bytes(8) else {
            throw StoreBackendError("the system random generator failed")
        }
        let id = bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) } & 0x7FFF_FFFF_FFFF_FFFF
        return id == 0 ? 1 : id
    }
}
