#if canImport(Glibc)
import Glibc
#endif
import PushSecurity
import PushWire
import PushSession

/// The credentials a deployment's keys let the bench make for itself: provider
/// credentials, device registrations (what `securepush device enroll` issues) and fetch
/// tokens (what LOGIN returns), all signed exactly as the services expect.
struct BenchCredentials {
    private let providerKey: SecretKey
    private let registrationSigner: CredentialSigner
    private let tokenSigner: CredentialSigner

    init(_ deployment: Deployment) {
        providerKey = deployment.providerKey
        registrationSigner = CredentialSigner(serverKey: deployment.serverKey, purpose: CredentialSigner.registrationPurpose)
        tokenSigner = CredentialSigner(serverKey: deployment.serverKey, purpose: CredentialSigner.fetchTokenPurpose)
    }

    /// Valid for 300 s either side of now, once: make it just before HELLO.
    func provider(for audience: CredentialAudience) -> [UInt8] {
        HelloCredential.provider(providerKey).make(for: audience, nowMs: Clocks.wallMilliseconds())
    }

    func registration(device: String, user: String, tags: [String]) -> [UInt8] {
        let now = Clocks.wallMilliseconds()
        return Registration(deviceID: device, user: user, tags: tags, issuedAt: now, expiresAt: now + 24 * 3_600_000)
            .signed(by: registrationSigner)
    }

    func fetchToken(device: String, user: String) -> [UInt8] {
        let now = Clocks.wallMilliseconds()
        return FetchToken(user: user, deviceID: device, issuedAt: now, expiresAt: now + 3_600_000).signed(by: tokenSigner)
    }
}

