import Crypto
import FoundationEssentials
import PushWire

/// A device's key pair for sealed payloads (SPEC.md 7.6, 7.5-6). The private half stays on
/// the device, in the `device-key` file whose text `fileText` is; the public half goes to the
/// store in LOGIN.
public struct DeviceKeyPair: Sendable {
    enum PrivateKey: Sendable {
        case x25519(Curve25519.KeyAgreement.PrivateKey)
        case xwing(XWingMLKEM768X25519.PrivateKey)
    }

    let privateKey: PrivateKey
    /// The registered bytes: 32 for X25519, 1216 for X-Wing.
    public let publicKey: [UInt8]

    public var suite: KeySuite {
        switch privateKey {
        case .x25519: .x25519
        case .xwing: .xwing
        }
    }

    init(_ privateKey: PrivateKey) {
        self.privateKey = privateKey
        switch privateKey {
        case .x25519(let key): publicKey = Array(key.publicKey.rawRepresentation)
        case .xwing(let key): publicKey = Array(key.publicKey.rawRepresentation)
        }
    }

    /// A fresh key pair from swift-crypto's generator.
    public static func generate(suite: KeySuite) throws(SealingError) -> DeviceKeyPair {
        switch suite {
        case .x25519:
            return DeviceKeyPair(.x25519(Curve25519.KeyAgreement.PrivateKey()))
        case .xwing:
            do {
                return DeviceKeyPair(.xwing(try XWingMLKEM768X25519.PrivateKey.generate()))
            } catch {
                throw .sealFailed
            }
        }
    }

    /// The key pair from its private half: the X25519 scalar (32 bytes) or X-Wing's seed
    /// (32 bytes, `seedRepresentation`).
    public init(suite: KeySuite, privateKey bytes: [UInt8]) throws(SealingError) {
        do {
            switch suite {
            case .x25519:
                self.init(.x25519(try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: bytes)))
            case .xwing:
                guard bytes.count == 32 else { throw SealingError.keyFileKey(suite: suite, bytes: bytes.count) }
                self.init(.xwing(try XWingMLKEM768X25519.PrivateKey(seedRepresentation: bytes, publicKey: nil)))
            }
        } catch {
            throw .keyFileKey(suite: suite, bytes: bytes.count)
        }
    }

    /// The private half as the `device-key` file stores it.
    public var privateKeyBytes: [UInt8] {
        switch privateKey {
        case .x25519(let key): Array(key.rawRepresentation)
        case .xwing(let key): Array(key.seedRepresentation)
        }
    }

    /// The public half as LOGIN carries it (4.6-5).
    public var devicePublicKey: DevicePublicKey { DevicePublicKey(suite: suite, bytes: publicKey) }

    /// This key's id for the device (7.6-2).
    public func keyID(deviceID: String) -> KeyID {
        SealedNames.keyID(suite: suite, deviceID: deviceID, publicKey: publicKey)
    }

    /// The `device-key` file (7.5-6): one line of the suite digit, a space, the private half
    /// in lowercase hex, and a newline.
    public var fileText: String { "\(suite.rawValue) \(privateKeyBytes.hexString)\n" }

    /// Reads `fileText` back. A final newline is optional; nothing else is.
    public init(fileText: String) throws(SealingError) {
        var line = Substring(fileText)
        if line.hasSuffix("\n") { line = line.dropLast() }
        let parts = line.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].utf8.count == 1, !parts[1].isEmpty,
              let bytes = [UInt8](hex: String(parts[1])) else { throw .keyFileSyntax }
        guard let number = UInt8(parts[0]), let suite = KeySuite(rawValue: number) else {
            throw .keyFileSuite(String(parts[0]))
        }
        try self.init(suite: suite, privateKey: bytes)
    }
}
