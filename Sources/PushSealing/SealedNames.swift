import PushSecurity
import PushWire

/// The names SPEC.md 7.6 derives with SHA-256: a sealed payload's id from its nonce, and a
/// device key's id from the key. The labels are ASCII with no terminator.
public enum SealedNames {
    static let idLabel = Array("securepush sealed id v1".utf8)
    static let keyIDLabel = Array("securepush device key id v1".utf8)
    static let infoLabel = Array("securepush sealed key v1".utf8)
    static let bodyLabel = Array("securepush sealed body v1".utf8)

    /// `SHA-256("securepush sealed id v1" || seal_nonce)[0..16]`: the sender knows the id
    /// before it seals, and cannot choose it (7.6-1).
    public static func payloadID(sealNonce: [UInt8]) -> PayloadID { payloadID(sealNonce: sealNonce[...]) }

    /// Concrete types, not a generic sequence: on a sealed STORE's path the generic concatenation
    /// cost as much as the hash.
    public static func payloadID(sealNonce: ArraySlice<UInt8>) -> PayloadID {
        var input = idLabel
        input.append(contentsOf: sealNonce)
        let digest = SHA256Hash.digest(input)
        return PayloadID(high: bigEndian(digest[0..<8]), low: bigEndian(digest[8..<16]))
    }

    /// `SHA-256("securepush device key id v1" || key_suite || n(device_id) || device_key)[0..8]` (7.6-2).
    public static func keyID(suite: KeySuite, deviceID: String, publicKey: [UInt8]) -> KeyID {
        let digest = SHA256Hash.digest(keyIDLabel + [suite.rawValue] + lengthPrefixed(deviceID) + publicKey)
        return KeyID(value: bigEndian(digest[0..<8]))
    }

    /// HPKE's `info` for one stanza: `"securepush sealed key v1" || id || n(recipient) ||
    /// n(device_id) || key_suite || key_id` (7.6-3). All of the binding is here, and the aad
    /// is empty, because pyca/cryptography's public HPKE API takes no aad.
    public static func stanzaInfo(id: PayloadID, recipient: String, deviceID: String, suite: KeySuite, keyID: KeyID) -> [UInt8] {
        var info = infoLabel
        info.reserveCapacity(infoLabel.count + PayloadID.byteCount + 2 * 65 + 1 + KeyID.byteCount)
        id.append(to: &info)
        info += lengthPrefixed(recipient)
        info += lengthPrefixed(deviceID)
        info.append(suite.rawValue)
        info += keyID.bytes
        return info
    }

    /// The body's additional data: `"securepush sealed body v1" || id || n(recipient)` (7.6-4).
    /// Every device opens the same body, so it binds no device.
    public static func bodyAAD(id: PayloadID, recipient: String) -> [UInt8] {
        var aad = bodyLabel
        aad.reserveCapacity(bodyLabel.count + PayloadID.byteCount + 65)
        id.append(to: &aad)
        aad += lengthPrefixed(recipient)
        return aad
    }

    static func bigEndian(_ bytes: ArraySlice<UInt8>) -> UInt64 { bytes.reduce(0) { $0 << 8 | UInt64($1) } }

    /// `n(s)`: one length byte, then the UTF-8 bytes (identifiers are 1 to 64 bytes, 3.3-8).
    static func lengthPrefixed(_ identifier: String) -> [UInt8] {
        let bytes = Array(identifier.utf8)
        return [UInt8(truncatingIfNeeded: bytes.count)] + bytes
    }
}
