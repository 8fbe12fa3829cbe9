import Crypto
import PushWire

extension KeySuite {
    /// The RFC 9180 ciphersuite behind the protocol's suite number (7.6-3).
    var hpkeCiphersuite: HPKE.Ciphersuite {
        switch self {
        case .x25519: .Curve25519_SHA256_ChachaPoly
        case .xwing: .XWingMLKEM768X25519_SHA256_AES_GCM_256
        }
    }
}

/// Sizes of the sealed payload's secrets and sealed parts (7.6).
enum SealedSizes {
    static let sealNonce = 16
    static let contentKey = 32
    static let tag = 16
    /// HPKE's seal of the 32-byte content key: key and tag.
    static let wrappedKey = contentKey + tag
    /// The body is ChaCha20-Poly1305 under a key used once, so its nonce is fixed (7.6-1).
    static let bodyNonce = [UInt8](repeating: 0, count: 12)
}
