import PushSecurity
import PushWire

/// What the gateway says to a device's HELLO.
public enum DeviceAdmission: Equatable, Sendable {
    case admit(Registration)
    /// ERROR with this status and reply text; `reason` is for the log only ("registration
    /// refused: " and bad, expired, not enrolled or revoked).
    case refuse(Status, reply: String, reason: String)
    /// Not in the registry, but issued so lately that the registry may not have heard of
    /// its enrolment yet ([7.4-8]): ask again once the next changes are in.
    case unheard
}

/// The device side of HELLO and the registry's changes: who may connect, and what a
/// revocation does to connections and queues.
extension GatewayLogic {
    /// The registration a device presents in HELLO ([7.4-4]): signed with the server key
    /// and unexpired and, when the gateway follows a registry, enrolled there as exactly
    /// these bytes. Until the registry is loaded once, BUSY: the device retries. With
    /// `mayWait`, a registration the registry does not hold that was issued less than
    /// `unheardEnrolmentMs` ago is `.unheard` rather than refused.
    public func admitDevice(_ credential: [UInt8]?, mayWait: Bool = false) -> DeviceAdmission {
        guard let credential else {
            metrics.credentialRefused(.deviceMissing)
            return .refuse(.badRequest, reply: "a device must send its registration", reason: "registration refused: missing")
        }
        let now = wallClock()
        let registration: Registration
        do {
            registration = try Registration.open(credential, signer: registrationSigner, nowMs: now)
        } catch {
            let expired = error == .expired
            metrics.credentialRefused(expired ? .deviceExpired : .deviceBad)
            return .refuse(.badCredentials, reply: "registration refused",
                           reason: expired ? "registration refused: expired" : "registration refused: bad (\(error))")
        }
        guard let registry else { return .admit(registration) }
        guard registry.isLoaded else {
            registryMetrics?.hellosBeforeLoad.increment()
            return .refuse(.busy, reply: "the gateway is loading its device registry; retry", reason: "registration not checked: the device registry is not loaded yet")
        }
        switch registry.standing(of: credential, registration: registration, nowMs: now) {
        case .enrolled:
            return .admit(registration)
        case .revoked:
            metrics.credentialRefused(.deviceRevoked)
            return .refuse(.badCredentials, reply: "registration revoked", reason: "registration refused: revoked")
        case .notEnrolled:
            if mayWait, now < registration.issuedAt &+ GatewayLogic.unheardEnrolmentMs { return .unheard }
            metrics.credentialRefused(.deviceNotEnrolled)
            return .refuse(.badCredentials, reply: Registration.notEnrolledReply, reason: "registration refused: not enrolled")
        }
    }

    /// How recently issued a registration the registry does not hold must be for its HELLO
    /// to be held ([7.4-8]): a tool records the enrolment before it hands the registration
    /// out, so an older one the registry lacks was never enrolled, or not here.
    public static let unheardEnrolmentMs: UInt64 = 5_000
    /// How long such a HELLO is held at most: the store answers a held REGISTRY within a
    /// second of a change ([4.16-8]).
    public static let unheardHoldMs: Int64 = 1_500

    /// Whether a registry is followed and loaded: without a registry, always.
    public var isRegistryReady: Bool { registry?.isLoaded ?? true }

    /// A reply to REGISTRY, in the order the store sent them: the registry takes the
    /// changes, then live connections of revoked registrations are closed with GOAWAY
    /// REVOKED and the queues of devices no longer enrolled are dropped.
    @discardableResult
    public func applyRegistry(_ reply: RegistryOK) -> RegistryUpdate {
        let now = wallClock()
        guard let registryMetrics, let update = registry?.apply(reply, nowMs: now) else { return RegistryUpdate() }
        registryMetrics.revocations.increment(by: update.revocations)
        registryMetrics.entriesIgnored.increment(by: update.ignored)
        if update.becameLoaded {
            // On a gateway of several loops the first loop's gauge says it, once all are loaded.
            if placement == nil { registryMetrics.loaded.set(1) }
            registryLoaded?()
        }
        for deviceID in update.changedDevices {
            settle(deviceID, closeIfRevoked: update.revokedDevices.contains(deviceID))
        }
        countRegistry()
        return update
    }

    /// Forgets registrations that expired; the devices that lost theirs keep no queue
    /// (a connected one stays connected: it was admitted while its registration was good,
    /// as without a registry, but no target matches it any more).
    @discardableResult
    public func removeExpiredRegistrations() -> [ExactName] {
        let now = wallClock()
        guard let gone = registry?.removeExpired(nowMs: now) else { return [] }
        for deviceID in gone { settle(deviceID, closeIfRevoked: false) }
        countRegistry()
        return gone
    }

    /// Brings what the gateway holds for a device in line with the registry: a connection
    /// whose registration was revoked is closed (when `closeIfRevoked`), a device without
    /// an enrolled registration, or now enrolled for another user, keeps no queue, and the
    /// record of an enrolled device follows its user and tags.
    func settle(_ deviceID: ExactName, closeIfRevoked: Bool = false) {
        guard let registry, let record = devices[deviceID] else { return }
        let current = registry.enrolledRegistration(of: deviceID, nowMs: wallClock())?.registration
        if closeIfRevoked, let link = record.link, current?.issuedAt != record.linkIssuedAt {
            // Detached before the GOAWAY, as for a replaced connection: nothing more is
            // written to it, and what it did not acknowledge goes back to the queue.
            record.link = nil
            metrics.devicesOnline.decrement()
            takeBackInFlight(record)
            registryMetrics?.devicesRevoked.increment()
            actions.append(.revoked(link))
        }
        guard let current, current.user.isExactly(record.user) else {
            guard record.link == nil else { return }
            registryMetrics?.pushesRevoked.increment(by: record.queue.count + record.inFlight.count)
            devices[deviceID] = nil
            return
        }
        record.tags = DeviceTags(current.tags)
    }

    private func countRegistry() {
        guard let registry, let registryMetrics else { return }
        registryMetrics.enrolled.set(registry.enrolledCount)
        registryMetrics.revoked.set(registry.revokedCount)
        registryMetrics.cursor.set(Int(clamping: registry.cursor))
    }
}
