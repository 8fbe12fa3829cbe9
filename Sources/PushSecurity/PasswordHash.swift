import COpenSSL
import PushWire

/// A salted, slow password hash: PBKDF2-HMAC-SHA256, stored as
/// `pbkdf2-sha256$ITERATIONS$SALT_HEX$HASH_HEX`.
public struct PasswordHash: Sendable, Equatable {
    public static let defaultIterations = 210_000
    public let iterations: Int
    public let salt: [UInt8]
    public let hash: [UInt8]

    public static func make(password: [UInt8], iterations: Int = defaultIterations) throws(SecurityError) -> PasswordHash {
        let salt = try SecureRandom.bytes(16)
        return PasswordHash(iterations: iterations, salt: salt, hash: try derive(password, salt: salt, iterations: iterations))
    }

    /// Checked against when a user does not exist, so that costs what a wrong password costs:
    /// `iterations` must be what the deployment hashes new passwords with, or the time of a
    /// failed LOGIN tells an unknown user from a known one.
    public static func dummy(iterations: Int) -> PasswordHash {
        PasswordHash(iterations: iterations, salt: [UInt8](repeating: 0, count: 16), hash: [UInt8](repeating: 0, count: 32))
    }

    public func verify(password: [UInt8]) -> Bool {
        guard let candidate = try? PasswordHash.derive(password, salt: salt, iterations: iterations) else { return false }
        return candidate.withUnsafeBytes { a in hash.withUnsafeBytes { b in HMACSHA256.constantTimeEqual(a, b) } }
    }

    static func derive(_ password: [UInt8], salt: [UInt8], iterations: Int) throws(SecurityError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        let ok = password.withUnsafeBufferPointer { pw in
            pw.withMemoryRebound(to: CChar.self) { pwChars in
                PKCS5_PBKDF2_HMAC(pwChars.baseAddress, Int32(pw.count), salt, Int32(salt.count),
                                  Int32(iterations), EVP_sha256(), Int32(out.count), &out)
            }
        }
        guard ok == 1 else { throw .keyDerivationFailed }
        return out
    }

    public var encoded: String {
        "pbkdf2-sha256$\(iterations)$\(salt.hexString)$\(hash.hexString)"
    }

    public init?(encoded: String) {
        let parts = encoded.split(separator: "$").map(String.init)
        guard parts.count == 4, parts[0] == "pbkdf2-sha256", let iterations = Int(parts[1]), iterations > 0,
              let salt = [UInt8](hex: parts[2]), let hash = [UInt8](hex: parts[3]), hash.count == 32 else { return nil }
        self.init(iterations: iterations, salt: salt, hash: hash)
    }

    private init(iterations: Int, salt: [UInt8], hash: [UInt8]) {
        self.iterations = iterations
        self.salt = salt
        self.hash = hash
    }
}
