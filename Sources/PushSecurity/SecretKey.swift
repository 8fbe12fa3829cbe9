import COpenSSL
import PushWire

/// 32 random bytes: the deployment's server key or a provider key.
public struct SecretKey: Sendable, Equatable {
    public static let byteCount = 32
    public let bytes: [UInt8]

    public init?(bytes: [UInt8]) {
        guard bytes.count == SecretKey.byteCount else { return nil }
        self.bytes = bytes
    }

    public static func generate() throws(SecurityError) -> SecretKey {
        SecretKey(unchecked: try SecureRandom.bytes(SecretKey.byteCount))
    }

    private init(unchecked bytes: [UInt8]) { self.bytes = bytes }

    /// A subkey for one purpose, so a token key can never verify a registration
    /// (SPEC.md section 7).
    public func derive(purpose: String) -> SecretKey {
        SecretKey(unchecked: HKDF.expand(prk: HKDF.extract(salt: [], inputKeyMaterial: bytes),
                                         info: Array(purpose.utf8), length: SecretKey.byteCount))
    }

    /// The key file's text: 64 hex digits and a newline.
    public var fileText: String { bytes.hexString + "\n" }

    public init?(fileText: String) {
        guard let bytes = [UInt8](hex: fileText.filter { !$0.isWhitespace }) else { return nil }
        self.init(bytes: bytes)
    }
}

public enum SecurityError: Error, Equatable, CustomStringConvertible {
    case randomUnavailable
    case keyDerivationFailed

    public var description: String {
        switch self {
        case .randomUnavailable: "the system random generator failed"
        case .keyDerivationFailed: "password hashing failed"
        }
    }
}

public enum SecureRandom {
    public static func bytes(_ count: Int) throws(SecurityError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        guard RAND_bytes(&out, Int32(count)) == 1 else { throw .randomUnavailable }
        return out
    }
}
