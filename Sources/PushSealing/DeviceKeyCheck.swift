import Crypto
import FoundationEssentials
import PushWire

/// The one check of a device's public key (SPEC.md 7.6): the store runs it at LOGIN, the
/// sealer before it seals to a listed key.
public enum DeviceKeyCheck {
    /// A key swift-crypto takes for the suite, parsed once for the sealer.
    enum RecipientKey: Sendable {
        case x25519(Curve25519.KeyAgreement.PublicKey)
        case xwing(XWingMLKEM768X25519.PublicKey)
    }

    /// Refuses a key of the wrong length for its suite, one swift-crypto does not take, and an
    /// X25519 key of small order. For X-Wing a trial encapsulation parses the ML-KEM half
    /// (BoringSSL's modulus check) and refuses an all-zero X25519 agreement itself.
    public static func validatePublicKey(_ key: DevicePublicKey) throws(SealingError) {
        try validatePublicKey(suite: key.suite, bytes: key.bytes)
    }

    public static func validatePublicKey(suite: KeySuite, bytes: [UInt8]) throws(SealingError) {
        switch try recipientKey(suite: suite, bytes: bytes) {
        case .x25519: break
        case .xwing(let key):
            do { _ = try key.encapsulate() } catch { throw .publicKeyRejected(suite: .xwing) }
        }
    }

    /// The parsed key, after the length check and, for X25519, the small-order check. An
    /// X-Wing key that fails to encapsulate is found by the HPKE sender that uses it.
    static func recipientKey(suite: KeySuite, bytes: [UInt8]) throws(SealingError) -> RecipientKey {
        guard bytes.count == suite.publicKeyCount else { throw .publicKeyLength(suite: suite, bytes: bytes.count) }
        switch suite {
        case .x25519:
            let key: Curve25519.KeyAgreement.PublicKey
            do { key = try Curve25519.KeyAgreement.PublicKey(rawRepresentation: bytes) } catch {
                throw .publicKeyRejected(suite: suite)
            }
            try refuseSmallOrder(key)
            return .x25519(key)
        case .xwing:
            do { return .xwing(try XWingMLKEM768X25519.PublicKey(rawRepresentation: bytes)) } catch {
                throw .publicKeyRejected(suite: suite)
            }
        }
    }

    /// A clamped X25519 scalar is a multiple of the cofactor 8, so its agreement with a point
    /// is zero exactly when the point's order divides 8, whatever the scalar: one agreement
    /// with a key of our own decides it. swift-crypto 4.5.2 does not check the all-zero
    /// result that RFC 9180 7.1.4 requires senders to refuse.
    static func refuseSmallOrder(_ key: Curve25519.KeyAgreement.PublicKey) throws(SealingError) {
        let secret: SharedSecret
        do { secret = try probeKey.sharedSecretFromKeyAgreement(with: key) } catch { throw .publicKeyRejected(suite: .x25519) }
        let allZero = secret.withUnsafeBytes { bytes in bytes.allSatisfy { $0 == 0 } }
        if allZero { throw .smallOrderKey }
    }

    /// The key the small-order check agrees with; any private key serves.
    static let probeKey = Curve25519.KeyAgreement.PrivateKey()
}
