import Foundation
import Testing
import PushWire
@testable import PushSecurity

/// protocol/vectors/credentials.txt: section 7's worked example, produced by the spec's
/// independent Python encoder.
struct WorkedExample {
    let values: [String: String]

    init() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("protocol/vectors/credentials.txt")
        var values: [String: String] = [:]
        for line in try String(contentsOf: url, encoding: .utf8).split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: " ", maxSplits: 1).map(String.init)
            if parts.count == 2 { values[parts[0]] = parts[1] }
        }
        self.values = values
    }

    func bytes(_ name: String) throws -> [UInt8] { try #require([UInt8](hex: values[name] ?? "")) }
    func number(_ name: String) throws -> UInt64 { try #require(UInt64(values[name] ?? "")) }
    func key(_ name: String) throws -> SecretKey { try #require(SecretKey(bytes: try bytes(name))) }
}

@Suite("Section 7 worked example")
struct WorkedExampleTests {
    @Test("[7.4-5] HKDF derives the fetch-token and registration keys")
    func derivation() throws {
        let example = try WorkedExample()
        let server = try example.key("server_key")
        #expect(server.derive(purpose: CredentialSigner.fetchTokenPurpose).bytes == (try example.bytes("fetch_key")))
        #expect(server.derive(purpose: CredentialSigner.registrationPurpose).bytes == (try example.bytes("registration_key")))
    }

    @Test("[7.3-1] the fetch token is byte for byte the spec's, and opens")
    func fetchToken() throws {
        let example = try WorkedExample()
        let signer = CredentialSigner(serverKey: try example.key("server_key"), purpose: CredentialSigner.fetchTokenPurpose)
        let token = FetchToken(user: "alice", deviceID: "phone-1", issuedAt: try example.number("fetch_token.issued_at"),
                               expiresAt: try example.number("fetch_token.expires_at"))
        #expect(token.signed(by: signer) == (try example.bytes("fetch_token")))
        #expect(try FetchToken.open(try example.bytes("fetch_token"), signer: signer, nowMs: token.issuedAt) == token)
    }

    @Test("[7.4-1] [7.4-2] the registration is byte for byte the spec's, tags included")
    func registration() throws {
        let example = try WorkedExample()
        let signer = CredentialSigner(serverKey: try example.key("server_key"), purpose: CredentialSigner.registrationPurpose)
        let registration = Registration(deviceID: "phone-1", user: "alice", tags: ["news", "oncall"],
                                        issuedAt: try example.number("registration.issued_at"),
                                        expiresAt: try example.number("registration.expires_at"))
        #expect(registration.signed(by: signer) == (try example.bytes("registration")))
        #expect(try Registration.open(try example.bytes("registration"), signer: signer, nowMs: registration.issuedAt) == registration)
        #expect(throws: CredentialError.expired) {
            try Registration.open(try example.bytes("registration"), signer: signer, nowMs: registration.expiresAt)
        }
    }

    @Test("[7.1-1] the provider credential is byte for byte the spec's")
    func providerCredential() throws {
        let example = try WorkedExample()
        let key = try example.key("provider_key")
        let stamp = try example.number("provider_credential.timestamp")
        let nonce = try example.bytes("provider_credential.nonce")
        let provider = HelloCredential.provider(key)
        #expect(provider.make(for: .store, nowMs: stamp, nonce: nonce) == (try example.bytes("provider_credential")))
        _ = try provider.verify(try example.bytes("provider_credential"), for: .store, nowMs: stamp + 1000)

        let gateway = HelloCredential.gateway(try example.key("server_key"))
        let gatewayNonce = try example.bytes("gateway_credential.nonce")
        #expect(gateway.make(for: .store, nowMs: stamp, nonce: gatewayNonce) == (try example.bytes("gateway_credential")))
    }
}
