import Testing
import PushWire
@testable import PushSecurity

@Suite("Crypto primitives against published vectors")
struct PrimitiveTests {
    @Test("HMAC-SHA256, RFC 4231 test case 2")
    func hmac() {
        let mac = HMACSHA256.authenticate(Array("what do ya want for nothing?".utf8), key: Array("Jefe".utf8))
        #expect(mac.hexString == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    @Test("HKDF-SHA256, RFC 5869 test case 1")
    func hkdf() {
        let prk = HKDF.extract(salt: Array(0...12), inputKeyMaterial: Array(repeating: 0x0B, count: 22))
        let okm = HKDF.expand(prk: prk, info: Array(0xF0...0xF9), length: 42)
        #expect(okm.hexString == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865")
    }

    @Test("PBKDF2-HMAC-SHA256, RFC 7914 section 11")
    func pbkdf2() throws {
        let derived = try PasswordHash.derive(Array("passwd".utf8), salt: Array("salt".utf8), iterations: 1)
        #expect(derived.hexString == "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc")
    }

    @Test("constant-time comparison")
    func compare() {
        let a: [UInt8] = [1, 2, 3], b: [UInt8] = [1, 2, 4]
        a.withUnsafeBytes { pa in
            b.withUnsafeBytes { pb in
                #expect(!HMACSHA256.constantTimeEqual(pa, pb))
                #expect(HMACSHA256.constantTimeEqual(pa, pa))
                #expect(!HMACSHA256.constantTimeEqual(pa, UnsafeRawBufferPointer(rebasing: pb[..<2])))
            }
        }
    }
}

@Suite("Password hashes")
struct PasswordHashTests {
    @Test("a password verifies against its own hash only, and the hash survives its text form")
    func verify() throws {
        let hash = try PasswordHash.make(password: Array("s3cret".utf8), iterations: 1000)
        #expect(hash.verify(password: Array("s3cret".utf8)))
        #expect(!hash.verify(password: Array("s3cret!".utf8)))
        #expect(!hash.verify(password: []))
        let parsed = try #require(PasswordHash(encoded: hash.encoded))
        #expect(parsed == hash)
        #expect(!hash.encoded.contains("s3cret"))
        #expect(try PasswordHash.make(password: Array("s3cret".utf8), iterations: 1000).salt != hash.salt)
    }

    @Test("malformed stored hashes are refused", arguments: ["", "plain", "pbkdf2-sha256$0$00$00", "pbkdf2-sha256$10$zz$00",
                                                             "md5$1$00$" + String(repeating: "0", count: 64)])
    func malformed(text: String) {
        #expect(PasswordHash(encoded: text) == nil)
    }
}

@Suite("Signed credentials")
struct CredentialTests {
    let serverKey = SecretKey(bytes: Array(repeating: 7, count: 32))!
    var tokens: CredentialSigner { CredentialSigner(serverKey: serverKey, purpose: CredentialSigner.fetchTokenPurpose) }
    var registrations: CredentialSigner { CredentialSigner(serverKey: serverKey, purpose: CredentialSigner.registrationPurpose) }

    @Test("[7.4-3] [5.1-7] a HELLO with the longest registration and every field at its longest fits in 1024 bytes")
    func longestHelloFits() {
        let credential = [UInt8](repeating: 0xAB, count: Registration.maxSignedBytes)
        let hello = Hello(role: .device, credential: credential, maxFrame: 65_536, keepaliveMs: 30_000, maxInflight: 64,
                          name: String(repeating: "n", count: 64))
        #expect(Message.hello(hello).encoded(correlation: 1).count <= FrameLimits.floor)
    }

    @Test("[7.2-5] a fetch token opens with its user, device and expiry")
    func tokenRoundTrip() throws {
        let token = FetchToken(user: "alice", deviceID: "phone", issuedAt: 1_000, expiresAt: 2_000)
        let opened = try FetchToken.open(token.signed(by: tokens), signer: tokens, nowMs: 1_999)
        #expect(opened == token)
    }

    @Test("[7.3-2] [7.2-4] an expired token is TOKEN_EXPIRED, a tampered one BAD_TOKEN")
    func tokenFailures() {
        let signed = FetchToken(user: "alice", deviceID: "phone", issuedAt: 1_000, expiresAt: 2_000).signed(by: tokens)
        #expect(throws: CredentialError.expired) { try FetchToken.open(signed, signer: tokens, nowMs: 2_000) }
        #expect(CredentialError.expired.status == .tokenExpired)
        for index in signed.indices {
            var tampered = signed
            tampered[index] ^= 0x01
            #expect(throws: CredentialError.self) { try FetchToken.open(tampered, signer: tokens, nowMs: 0) }
        }
        #expect(throws: CredentialError.malformed) { try FetchToken.open([], signer: tokens, nowMs: 0) }
        #expect(throws: CredentialError.malformed) { try FetchToken.open([1, 2, 3], signer: tokens, nowMs: 0) }
        #expect(CredentialError.badSignature.status == .badToken)
    }

    @Test("keys are separated by purpose and by deployment")
    func separation() {
        let signed = FetchToken(user: "alice", deviceID: "phone", issuedAt: 1_000, expiresAt: 2_000).signed(by: tokens)
        #expect(throws: CredentialError.badSignature) { try FetchToken.open(signed, signer: registrations, nowMs: 0) }
        let other = CredentialSigner(serverKey: SecretKey(bytes: Array(repeating: 8, count: 32))!, purpose: CredentialSigner.fetchTokenPurpose)
        #expect(throws: CredentialError.badSignature) { try FetchToken.open(signed, signer: other, nowMs: 0) }
    }

    @Test("a registration carries its tags")
    func registration() throws {
        let registration = Registration(deviceID: "d1", user: "bob", tags: ["news", "eu"], issuedAt: 5, expiresAt: 10)
        #expect(try Registration.open(registration.signed(by: registrations), signer: registrations, nowMs: 6) == registration)
        let untagged = Registration(deviceID: "d2", user: "bob", tags: [], issuedAt: 5, expiresAt: 10)
        #expect(try Registration.open(untagged.signed(by: registrations), signer: registrations, nowMs: 6) == untagged)
    }

    @Test("[7.1-3] a provider credential is accepted within the window only, and only under its key")
    func provider() throws {
        let key = SecretKey(bytes: Array(repeating: 9, count: 32))!
        let provider = HelloCredential.provider(key)
        let credential = provider.make(for: .store, nowMs: 1_000_000)
        #expect(credential.count == 56)
        _ = try provider.verify(credential, for: .store, nowMs: 1_000_000 + HelloCredential.windowMs)
        _ = try provider.verify(credential, for: .store, nowMs: 1_000_000 - HelloCredential.windowMs)
        #expect(throws: CredentialError.expired) {
            try provider.verify(credential, for: .store, nowMs: 1_000_001 + HelloCredential.windowMs)
        }
        #expect(throws: CredentialError.badSignature) { try HelloCredential.provider(serverKey).verify(credential, for: .store, nowMs: 1_000_000) }
        #expect(throws: CredentialError.malformed) { try provider.verify([1], for: .store, nowMs: 0) }
        #expect(throws: CredentialError.malformed) { try provider.verify(Array(credential.dropLast()), for: .store, nowMs: 1_000_000) }
    }

    @Test("[7.1-4] the audience is bound into the MAC, and provider and gateway credentials never pass for each other")
    func audience() throws {
        let key = SecretKey(bytes: Array(repeating: 9, count: 32))!
        let forStore = HelloCredential.provider(key).make(for: .store, nowMs: 1_000_000)
        #expect(throws: CredentialError.badSignature) { try HelloCredential.provider(key).verify(forStore, for: .gateway, nowMs: 1_000_000) }
        #expect(throws: CredentialError.badSignature) { try HelloCredential.gateway(key).verify(forStore, for: .store, nowMs: 1_000_000) }
        let gateway = HelloCredential.gateway(key).make(for: .store, nowMs: 1_000_000)
        _ = try HelloCredential.gateway(key).verify(gateway, for: .store, nowMs: 1_000_000)
        #expect(throws: CredentialError.badSignature) { try HelloCredential.provider(key).verify(gateway, for: .store, nowMs: 1_000_000) }
        #expect(HelloCredential.provider(key).make(for: .store, nowMs: 1_000_000) != forStore, "each credential has its own nonce")
    }

    @Test("[7.1-5] a server accepts each credential once within its window; the guard is bounded and forgets expired ones")
    func replays() throws {
        let key = SecretKey(bytes: Array(repeating: 9, count: 32))!
        let provider = HelloCredential.provider(key)
        let guardian = CredentialReplayGuard(capacity: 2)
        let hello = { (credential: [UInt8]) in Hello(role: .provider, credential: credential) }
        let first = provider.make(for: .store, nowMs: 1_000_000)
        #expect(provider.check(hello(first), for: .store, nowMs: 1_000_000, replays: guardian) == .admit)
        guard case .refuse(.badCredentials, _, let reason) = provider.check(hello(first), for: .store, nowMs: 1_000_500, replays: guardian) else {
            Issue.record("a replayed credential was admitted"); return
        }
        #expect(reason.contains("replayed"))
        let second = provider.make(for: .store, nowMs: 1_000_000)
        #expect(provider.check(hello(second), for: .store, nowMs: 1_000_000, replays: guardian) == .admit)
        let third = provider.make(for: .store, nowMs: 1_000_000)
        guard case .refuse(.busy, _, _) = provider.check(hello(third), for: .store, nowMs: 1_000_000, replays: guardian) else {
            Issue.record("a full guard admitted a credential it cannot remember"); return
        }
        // At the window's last millisecond the first is still valid and still remembered.
        let edge = 1_000_000 + HelloCredential.windowMs
        guard case .refuse(.badCredentials, _, let atEdge) = provider.check(hello(first), for: .store, nowMs: edge, replays: guardian) else {
            Issue.record("a replay at the window's edge was admitted"); return
        }
        #expect(atEdge.contains("replayed"))
        // Past it they are forgotten, and expired anyway.
        let later = edge + 1
        let fresh = provider.make(for: .store, nowMs: later)
        #expect(provider.check(hello(fresh), for: .store, nowMs: later, replays: guardian) == .admit)
        guard case .refuse(.badCredentials, _, let expired) = provider.check(hello(first), for: .store, nowMs: later, replays: guardian) else {
            Issue.record("an expired credential was admitted"); return
        }
        #expect(expired.contains("expired"))
        guard case .refuse(.badRequest, _, _) = provider.check(Hello(role: .provider), for: .store, nowMs: later, replays: guardian) else {
            Issue.record("a HELLO without credential was not BAD_REQUEST"); return
        }
    }

    @Test("key files hold 64 hex digits")
    func keyFile() throws {
        let key = try SecretKey.generate()
        #expect(key.fileText.count == 65)
        #expect(SecretKey(fileText: key.fileText) == key)
        #expect(SecretKey(fileText: "abc") == nil)
        #expect(try SecretKey.generate() != key)
    }
}
