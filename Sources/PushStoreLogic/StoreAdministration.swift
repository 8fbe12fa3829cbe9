import PushSecurity
import PushSession

/// The deployment commands' side of the users (`securepush user`), whichever database
/// the store keeps them in. Each change is one transaction; a running store sees it on
/// its next request that depends on it.
public protocol UserAdministering: AnyObject {
    /// The new user, or nil if the name is taken.
    func add(_ name: String, passwordHash: String, nowMs: UInt64) throws -> UserRecord?
    /// What was removed (her payloads deleted, her tokens and registrations revoked, in
    /// one transaction), or nil if there is no such user.
    func remove(_ name: String, clock: () -> UInt64) throws -> RemovedUser?
    /// Every user, by name.
    func list(nowMs: UInt64) throws -> [UserSummary]
}

/// The device commands' side of the registry (`securepush device enroll`, `list`,
/// `revoke`), whichever database the store keeps it in.
public protocol RegistryAdministering: AnyObject {
    /// Enrolls many devices in one transaction, each revoking the earlier registration of
    /// its id; `deliver` hands each credential over before anything is committed, and if it
    /// throws nothing is.
    func enrollAll(_ requests: [EnrolmentRequest], lifetimeMs: UInt64, nowMs: UInt64, signer: CredentialSigner,
                   deliver: (EnrolmentRequest, [UInt8]) throws -> Void) throws(EnrolmentError) -> [Enrolment]
    /// Revokes the enrolled registrations of every id in `deviceIDs` in one transaction;
    /// how many there were.
    func revoke(deviceIDs: [String], nowMs: UInt64) throws -> [RegistrationRecord]
    /// Every registration kept, of one user's name or of all, by device id then issue time.
    func list(user: String?) throws -> [RegistrationRecord]
    /// The enrolled registration of `deviceID`, if any.
    func enrolled(deviceID: String) throws -> RegistrationRecord?
    /// The number of the last change to the registry (0 before the first).
    func lastChange() throws -> UInt64
}

extension RegistryAdministering {
    /// Enrolls one device, as `enrollAll` would.
    public func enroll(user: String, deviceID: String, tags: [String], lifetimeMs: UInt64, nowMs: UInt64,
                       signer: CredentialSigner, deliver: ([UInt8]) throws -> Void = { _ in }) throws(EnrolmentError) -> Enrolment {
        let request = EnrolmentRequest(user: user, deviceID: deviceID, tags: tags)
        let enrolments = try enrollAll([request], lifetimeMs: lifetimeMs, nowMs: nowMs, signer: signer) { _, credential in
            try deliver(credential)
        }
        guard let enrolment = enrolments.first else { throw .storage(StoreBackendError("no enrolment recorded")) }
        return enrolment
    }

    /// Revokes the enrolled registration of `deviceID`: what it was, or nil if nothing
    /// enrolled has that id.
    public func revoke(deviceID: String, nowMs: UInt64) throws -> RegistrationRecord? {
        try revoke(deviceIDs: [deviceID], nowMs: nowMs).first
    }
}
