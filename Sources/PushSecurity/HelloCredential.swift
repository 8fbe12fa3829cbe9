import PushWire

/// The server a HELLO credential is meant for. It is part of the MAC, so a credential made
/// for the store is refused by the gateway and the other way round ([7.1-4]).
public enum CredentialAudience: UInt8, Sendable {
    case store = 1
    case gateway = 2
}

/// The parts of a verified HELLO credential a server remembers to refuse a replay.
public struct CredentialStamp: Hashable, Sendable {
    public var issuedAt: UInt64
    public var nonce: [UInt8]
}

/// The HELLO credential of a provider (under the provider key) and of a gateway reading the
/// store's registry (under a key derived from the server key): a timestamp, a random nonce
/// and an HMAC of both and of the audience, accepted within a window around the server's
/// clock and only once ([7.1-1] to [7.1-6]).
public struct HelloCredential: Sendable {
    public static let windowMs: UInt64 = 300_000
    public static let nonceCount = 16
    public static let byteCount = 8 + nonceCount + HMACSHA256.byteCount
    public static let gatewayPurpose = "securepush gateway v1"

    private let key: [UInt8]
    private let context: [UInt8]

    /// A provider's credentials, under the deployment's provider key.
    public static func provider(_ providerKey: SecretKey) -> HelloCredential {
        HelloCredential(key: providerKey.bytes, context: Array("securepush-provider-v2".utf8))
    }

    /// A gateway's credentials for the store, under a key derived from the server key.
    public static func gateway(_ serverKey: SecretKey) -> HelloCredential {
        HelloCredential(key: serverKey.derive(purpose: gatewayPurpose).bytes, context: Array("securepush-gateway-v1".utf8))
    }

    /// A fresh credential. Nothing is signed if the system's random generator fails: it
    /// is not something a peer can cause, and without a nonce the credential is unsafe.
    public func make(for audience: CredentialAudience, nowMs: UInt64) -> [UInt8] {
        let nonce: [UInt8]
        do {
            nonce = try SecureRandom.bytes(HelloCredential.nonceCount)
        } catch {
            preconditionFailure("\(error)")
        }
        return make(for: audience, nowMs: nowMs, nonce: nonce)
    }

    /// A credential with a given nonce, for test vectors.
    public func make(for audience: CredentialAudience, nowMs: UInt64, nonce: [UInt8]) -> [UInt8] {
        precondition(nonce.count == HelloCredential.nonceCount)
        var stamp: [UInt8] = []
        stamp.reserveCapacity(HelloCredential.byteCount)
        withUnsafeBytes(of: nowMs.bigEndian) { stamp.append(contentsOf: $0) }
        stamp += nonce
        return stamp + mac(stamp, audience: audience)
    }

    /// Checks the length, the MAC (in constant time, before anything else is trusted) and
    /// the timestamp's window, and returns what identifies the credential for replays.
    public func verify(_ credential: [UInt8], for audience: CredentialAudience, nowMs: UInt64) throws(CredentialError) -> CredentialStamp {
        guard credential.count == HelloCredential.byteCount else { throw .malformed }
        let stampCount = 8 + HelloCredential.nonceCount
        let expected = mac(Array(credential[..<stampCount]), audience: audience)
        let valid = expected.withUnsafeBytes { a in
            credential.withUnsafeBytes { HMACSHA256.constantTimeEqual(a, UnsafeRawBufferPointer(rebasing: $0[stampCount...])) }
        }
        guard valid else { throw .badSignature }
        let issued = credential[..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let skew = issued > nowMs ? issued - nowMs : nowMs - issued
        guard skew <= HelloCredential.windowMs else { throw .expired }
        return CredentialStamp(issuedAt: issued, nonce: Array(credential[8..<stampCount]))
    }

    private func mac(_ stamp: [UInt8], audience: CredentialAudience) -> [UInt8] {
        HMACSHA256.authenticate(context + [audience.rawValue] + stamp, key: key)
    }
}

/// What a server says to a HELLO credential: admit, or refuse with a status and a reason
/// for its log (the reply carries only the status and a generic text, [8-8]).
public enum HelloCredentialCheck: Equatable, Sendable {
    case admit
    case refuse(Status, reply: String, reason: String)
}

extension HelloCredential {
    /// The HELLO half of the check, the same at every server ([4.2-2], [4.2-4], [7.1-5]):
    /// present, valid, within its window, and not seen before.
    public func check(_ hello: Hello, for audience: CredentialAudience, nowMs: UInt64,
                      replays: CredentialReplayGuard) -> HelloCredentialCheck {
        guard let credential = hello.credential else {
            return .refuse(.badRequest, reply: "a \(hello.role) must send its credential", reason: "no credential")
        }
        let stamp: CredentialStamp
        do {
            stamp = try verify(credential, for: audience, nowMs: nowMs)
        } catch {
            return .refuse(.badCredentials, reply: "\(hello.role) credential refused", reason: "\(hello.role): \(error)")
        }
        switch replays.record(stamp, nowMs: nowMs) {
        case .fresh: return .admit
        case .replayed:
            return .refuse(.badCredentials, reply: "\(hello.role) credential refused", reason: "\(hello.role) credential replayed")
        case .full:
            return .refuse(.busy, reply: "too many new connections; retry", reason: "replay guard full")
        }
    }
}
