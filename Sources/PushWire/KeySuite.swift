/// The HPKE suite of a device key (SPEC.md 7.6, tag `key_suite`). The wire numbers are the
/// protocol's own: RFC 9180's suite ids are three numbers each and swift-crypto keeps them
/// behind an SPI.
public enum KeySuite: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    /// DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, ChaCha20-Poly1305.
    case x25519 = 1
    /// X-Wing (ML-KEM-768 with X25519), HKDF-SHA256, AES-256-GCM.
    case xwing = 2

    /// Bytes of the public key as registered and listed.
    public var publicKeyCount: Int {
        switch self {
        case .x25519: 32
        case .xwing: 1216
        }
    }

    /// Bytes of HPKE's encapsulated key (`enc`) in a stanza.
    public var encapsulatedKeyCount: Int {
        switch self {
        case .x25519: 32
        case .xwing: 1120
        }
    }

    /// The name used on the command line and in the HTTP API.
    public var description: String {
        switch self {
        case .x25519: "x25519"
        case .xwing: "xwing"
        }
    }

    public init?(name: String) {
        guard let suite = KeySuite.allCases.first(where: { $0.description == name }) else { return nil }
        self = suite
    }
}

/// Names one device key (SPEC.md 7.6): the first 8 bytes of a SHA-256 over the suite, the
/// device id and the public key. PushSealing computes it; the wire only carries it.
public struct KeyID: Hashable, Sendable, CustomStringConvertible {
    public static let byteCount = 8
    public let value: UInt64

    public init(value: UInt64) { self.value = value }

    /// Exactly 8 bytes, or nil.
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == KeyID.byteCount else { return nil }
        value = bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// 16 lowercase hex digits.
    public init?(hex: String) {
        guard hex.utf8.count == 16, let value = UInt64(hex, radix: 16) else { return nil }
        self.value = value
    }

    public var bytes: [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * $0)) } }

    public var description: String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
