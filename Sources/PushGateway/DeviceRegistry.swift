import PushSecurity
import PushWire

/// A registration the store's registry lists as enrolled: the credential exactly as the
/// device presents it in HELLO, and what it says.
public struct EnrolledRegistration: Equatable, Sendable {
    public var credential: [UInt8]
    public var registration: Registration

    public var deviceID: String { registration.deviceID }
}

/// What the registry says of a registration a device presents in HELLO ([7.4-4]).
public enum RegistryStanding: Equatable, Sendable {
    /// The registry holds exactly this registration as enrolled, and it has not expired.
    case enrolled
    /// Revoked, or replaced by a newer enrolment of the same device id.
    case revoked
    /// Never enrolled, as far as this registry knows (or no longer listed).
    case notEnrolled
}

/// What one REGISTRY_OK changed.
public struct RegistryUpdate: Equatable, Sendable {
    /// Device ids whose enrolled registration changed or went away (enrolled, replaced,
    /// revoked, expired): the gateway's state for them may have to follow.
    public var changedDevices: Set<ExactName> = []
    /// Device ids whose enrolled registration was revoked or replaced by a newer
    /// enrolment: a live connection made with it must close.
    public var revokedDevices: Set<ExactName> = []
    /// Entries taken in as enrolled.
    public var enrolled = 0
    /// Enrolled registrations that became revoked or were replaced.
    public var revocations = 0
    /// Entries whose credential did not verify under the registration key: ignored.
    public var ignored = 0
    /// Entries whose registration has expired: nothing to keep.
    public var expired = 0
    /// The registry was loaded (cursor 0 through has_more = 0) by this reply.
    public var becameLoaded = false

    public init() {}
}

/// The gateway's copy of the store's device registry (SPEC.md 4.16, [7.4-4], [4.13-7]):
/// the enrolled registration of each device id, indexed by user and by tag, and the
/// revoked registrations that have not expired yet. Fed with REGISTRY_OK replies in order;
/// no sockets and no clocks of its own, so it is tested as a value.
///
/// Every entry's credential is verified under the registration key as a HELLO would be:
/// what does not verify is ignored (a registry is data from the network, and the gateway
/// trusts only what the server key signed).
public struct DeviceRegistry {
    private let signer: CredentialSigner
    /// The cursor to ask from next: the change sequence number of the last change applied.
    public private(set) var cursor: UInt64 = 0
    /// True once the registry was read from cursor 0 through a reply with has_more = 0:
    /// before that, a device that is enrolled may not be listed yet.
    public private(set) var isLoaded = false
    /// The enrolled registration of each device id (at most one per id). Device ids, users
    /// and tags are keys by their exact bytes ([3.3-8]), as everywhere at the gateway.
    public private(set) var enrolled: [ExactName: EnrolledRegistration] = [:]
    private var byUser: [ExactName: Set<ExactName>] = [:]
    private var byTag: [ExactName: Set<ExactName>] = [:]
    /// Revoked registrations until they expire (after that, HELLO refuses them anyway):
    /// kept so that a refusal can say "revoked" rather than "not enrolled".
    private var revoked: [[UInt8]: UInt64] = [:]
    /// No registration held expires before this, so a sweep before it has nothing to do
    /// (it may be earlier than the true first expiry after removals: a scan finds nothing).
    private var earliestExpiryMs = UInt64.max
    /// On a gateway of several loops, each loop's registry keeps only the devices whose
    /// home it is (see `LoopPlacement`): nil keeps every device.
    public var placement: LoopPlacement?

    public init(serverKey: SecretKey) {
        signer = CredentialSigner(serverKey: serverKey, purpose: CredentialSigner.registrationPurpose)
    }

    public var enrolledCount: Int { enrolled.count }
    public var revokedCount: Int { revoked.count }

    // MARK: changes

    /// Applies a reply to REGISTRY: each entry is the latest state of one registration,
    /// oldest change first, so a later entry wins.
    public mutating func apply(_ reply: RegistryOK, nowMs: UInt64) -> RegistryUpdate {
        var update = RegistryUpdate()
        for entry in reply.entries { apply(entry, nowMs: nowMs, into: &update) }
        cursor = max(cursor, reply.cursor)
        if !reply.hasMore, !isLoaded {
            isLoaded = true
            update.becameLoaded = true
        }
        return update
    }

    private mutating func apply(_ entry: RegistryEntry, nowMs: UInt64, into update: inout RegistryUpdate) {
        let registration: Registration
        do {
            registration = try Registration.open(entry.credential, signer: signer, nowMs: nowMs)
        } catch .expired {
            // Nothing to keep; if it was the device's enrolled one, it no longer is.
            update.expired += 1
            revoked[entry.credential] = nil
            if let deviceID = Registration.readUnverified(entry.credential).map({ ExactName($0.deviceID) }),
               enrolled[deviceID]?.credential == entry.credential {
                remove(deviceID)
                update.changedDevices.insert(deviceID)
            }
            return
        } catch {
            // Counted once per process, by the first loop.
            if (placement?.index ?? 0) == 0 { update.ignored += 1 }
            return
        }
        guard placement?.isHome(of: registration.deviceID) ?? true else { return }
        let deviceID = ExactName(registration.deviceID)
        switch entry.state {
        case .enrolled:
            revoked[entry.credential] = nil
            earliestExpiryMs = min(earliestExpiryMs, registration.expiresAt)
            if let current = enrolled[deviceID] {
                guard current.credential != entry.credential else { return }
                // A newer enrolment of the device id: the one it replaces is as good as revoked.
                revoked[current.credential] = current.registration.expiresAt
                update.revokedDevices.insert(deviceID)
                update.revocations += 1
                remove(deviceID)
            }
            enrolled[deviceID] = EnrolledRegistration(credential: entry.credential, registration: registration)
            index(registration)
            update.enrolled += 1
            update.changedDevices.insert(deviceID)
        case .revoked:
            revoked[entry.credential] = registration.expiresAt
            earliestExpiryMs = min(earliestExpiryMs, registration.expiresAt)
            if enrolled[deviceID]?.credential == entry.credential {
                remove(deviceID)
                update.revokedDevices.insert(deviceID)
                update.revocations += 1
                update.changedDevices.insert(deviceID)
            }
        }
    }

    /// Forgets enrolled and revoked registrations that expired by `nowMs`; returns the
    /// device ids that lost their enrolled registration.
    public mutating func removeExpired(nowMs: UInt64) -> [ExactName] {
        guard nowMs >= earliestExpiryMs else { return [] }
        revoked = revoked.filter { $0.value > nowMs }
        let gone = enrolled.filter { $0.value.registration.expiresAt <= nowMs }.map(\.key)
        for deviceID in gone { remove(deviceID) }
        earliestExpiryMs = min(enrolled.values.lazy.map(\.registration.expiresAt).min() ?? .max, revoked.values.min() ?? .max)
        return gone
    }

    private mutating func index(_ registration: Registration) {
        let deviceID = ExactName(registration.deviceID)
        byUser[ExactName(registration.user), default: []].insert(deviceID)
        for tag in registration.tags { byTag[ExactName(tag), default: []].insert(deviceID) }
    }

    private mutating func remove(_ deviceID: ExactName) {
        guard let old = enrolled.removeValue(forKey: deviceID)?.registration else { return }
        let user = ExactName(old.user)
        byUser[user]?.remove(deviceID)
        if byUser[user]?.isEmpty == true { byUser[user] = nil }
        for name in old.tags {
            let tag = ExactName(name)
            byTag[tag]?.remove(deviceID)
            if byTag[tag]?.isEmpty == true { byTag[tag] = nil }
        }
    }

    // MARK: questions

    /// Whether `credential`, which verified as `registration`, is the device's enrolled,
    /// unexpired registration ([7.4-4]).
    public func standing(of credential: [UInt8], registration: Registration, nowMs: UInt64) -> RegistryStanding {
        if let current = enrolled[ExactName(registration.deviceID)] {
            if current.credential == credential {
                return current.registration.expiresAt > nowMs ? .enrolled : .notEnrolled
            }
            // An older registration of an enrolled device id was replaced, whether or not
            // its revocation has been listed yet.
            if registration.issuedAt < current.registration.issuedAt { return .revoked }
        }
        return revoked[credential] != nil ? .revoked : .notEnrolled
    }

    /// The device's enrolled registration, if it has one that has not expired.
    public func enrolledRegistration(of deviceID: ExactName, nowMs: UInt64) -> EnrolledRegistration? {
        guard let current = enrolled[deviceID], current.registration.expiresAt > nowMs else { return nil }
        return current
    }

    /// The device ids a push target matches ([4.13-7]): every enrolled device with that id,
    /// user or tag, whose registration has not expired, connected or not.
    public func forEachDevice(matching target: PushTarget, nowMs: UInt64, _ body: (EnrolledRegistration) -> Void) {
        func visit(_ deviceID: ExactName) {
            if let current = enrolledRegistration(of: deviceID, nowMs: nowMs) { body(current) }
        }
        switch target {
        case .device(let id):
            visit(ExactName(id))
        case .user(let user):
            for id in byUser[ExactName(user)] ?? [] { visit(id) }
        case .tag(let tag):
            for id in byTag[ExactName(tag)] ?? [] { visit(id) }
        }
    }
}
