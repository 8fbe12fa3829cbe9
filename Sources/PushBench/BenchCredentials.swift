#if canImport(Glibc)
import Glibc
#endif
import PushClock
import PushSecurity
import PushSession
import PushStore
import PushStoreLogic
import PushWire

/// The credentials a deployment's keys let the bench make for itself: provider
/// credentials, device registrations (what `securepush device enroll` issues) and fetch
/// tokens (what LOGIN returns), all signed exactly as the services expect.
///
/// Devices that LOGIN or present fetch tokens must be enrolled in the store's registry
/// ([4.6-4], [7.3-3]): `enroll` records them in the deployment's database, and from then
/// on their registrations and tokens are the enrolled ones. Loop-confined.
final class BenchCredentials {
    private let providerKey: SecretKey
    private let registrationSigner: CredentialSigner
    private let tokenSigner: CredentialSigner
    /// Registrations recorded in the registry, by device id.
    private(set) var enrolled: [String: RegistrationRecord] = [:]

    /// How long the bench's registrations last: any run ends well before.
    static let registrationLifetimeMs: UInt64 = 24 * 3_600_000

    convenience init(_ deployment: Deployment) {
        self.init(providerKey: deployment.providerKey, serverKey: deployment.serverKey)
    }

    init(providerKey: SecretKey, serverKey: SecretKey) {
        self.providerKey = providerKey
        registrationSigner = CredentialSigner(serverKey: serverKey, purpose: CredentialSigner.registrationPurpose)
        tokenSigner = CredentialSigner(serverKey: serverKey, purpose: CredentialSigner.fetchTokenPurpose)
    }

    /// Valid for 300 s either side of now, once: make it just before HELLO.
    func provider(for audience: CredentialAudience) -> [UInt8] {
        HelloCredential.provider(providerKey).make(for: audience, nowMs: Clocks.wallMilliseconds())
    }

    /// The device's enrolled registration, or one signed for the run alone (which a
    /// gateway that follows no registry accepts) if it was not enrolled.
    func registration(device: String, user: String, tags: [String]) -> [UInt8] {
        if let record = enrolled[device], record.user == user, record.tags == tags { return record.credential }
        let now = Clocks.wallMilliseconds()
        return Registration(deviceID: device, user: user, tags: tags, issuedAt: now, expiresAt: now + BenchCredentials.registrationLifetimeMs)
            .signed(by: registrationSigner)
    }

    /// A token as LOGIN would issue it, never dated before the device's registration.
    func fetchToken(device: String, user: String) -> [UInt8] {
        let now = max(Clocks.wallMilliseconds(), enrolled[device]?.issuedAt ?? 0)
        return FetchToken(user: user, deviceID: device, issuedAt: now, expiresAt: now + 3_600_000).signed(by: tokenSigner)
    }

    /// Enrolls `devices` of `user` with `tags` in the registry of the store's `database`,
    /// in one transaction.
    func enroll(_ devices: [String], user: String, tags: [String], database: StoreDatabase) throws(BenchError) {
        let requests = devices.map { EnrolmentRequest(user: user, deviceID: $0, tags: tags) }
        do {
            let registry = try database.registry()
            let enrolments = try registry.enrollAll(requests, lifetimeMs: BenchCredentials.registrationLifetimeMs,
                                                    nowMs: Clocks.wallMilliseconds(), signer: registrationSigner) { _, _ in }
            for enrolment in enrolments { enrolled[enrolment.registration.deviceID] = enrolment.registration }
        } catch {
            throw .setup("cannot enroll the bench's devices in \(database): \(error)")
        }
    }

    /// Revokes what `enroll` enrolled (the run is over); best effort.
    func revokeEnrolled(database: StoreDatabase) {
        guard !enrolled.isEmpty else { return }
        _ = try? database.registry().revoke(deviceIDs: Array(enrolled.keys), nowMs: Clocks.wallMilliseconds())
        enrolled = [:]
    }
}
