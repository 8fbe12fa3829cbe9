import Crypto
import FoundationEssentials
import PushWire

/// A sealed payload with the id it is stored under (7.6-1).
public struct SealedMessage: Sendable, Equatable {
    public let id: PayloadID
    public let bytes: [UInt8]
}

/// Seals a text to a user's device keys (SPEC.md 7.6): the provider before SEND, and the store
/// for seal on arrival. One fresh content key seals the body; each device gets it wrapped
/// with HPKE to its own key, bound to the payload, the user and the device.
public enum Sealer {
    /// The format's count is one byte, and 0 seals to nobody.
    public static let maxDevices = SealedPayload.maxStanzas

    /// Seals `plaintext` for `recipient`'s `devices` with a fresh seal_nonce and content key.
    /// Every key is checked first (its id, its length, small order); any failure refuses
    /// the whole payload, so that no device is silently left out.
    public static func seal(_ plaintext: [UInt8], recipient: String, devices: [DeviceKeyEntry]) throws(SealingError) -> SealedMessage {
        try seal(plaintext, to: SealingRecipients(recipient: recipient, devices: devices))
    }

    /// Seals to keys checked once before (`SealingRecipients`): a provider that keeps a
    /// user's keys seals every message to her without checking them again.
    public static func seal(_ plaintext: [UInt8], to recipients: SealingRecipients) throws(SealingError) -> SealedMessage {
        try seal(plaintext, to: recipients, sealNonce: randomBytes(SealedPayload.sealNonceCount), contentKey: SymmetricKey(size: .bits256))
    }

    /// With the two random inputs given: tests only, a caller must never reuse them.
    static func seal(_ plaintext: [UInt8], recipient: String, devices: [DeviceKeyEntry],
                     sealNonce: [UInt8], contentKey: SymmetricKey) throws(SealingError) -> SealedMessage {
        try seal(plaintext, to: SealingRecipients(recipient: recipient, devices: devices), sealNonce: sealNonce, contentKey: contentKey)
    }

    static func seal(_ plaintext: [UInt8], to recipients: SealingRecipients,
                     sealNonce: [UInt8], contentKey: SymmetricKey) throws(SealingError) -> SealedMessage {
        let recipient = recipients.recipient
        let targets = recipients.targets
        let id = SealedNames.payloadID(sealNonce: sealNonce)
        let contentKeyBytes = contentKey.withUnsafeBytes { Array($0) }
        var stanzas: [SealedPayload.Stanza] = []
        stanzas.reserveCapacity(targets.count)
        for (entry, key) in targets {
            let suite = entry.key.suite
            let info = Data(SealedNames.stanzaInfo(id: id, recipient: recipient, deviceID: entry.deviceID,
                                                   suite: suite, keyID: entry.keyID))
            let (encapsulatedKey, wrappedKey) = try wrap(contentKeyBytes, to: key, suite: suite, info: info)
            stanzas.append(SealedPayload.Stanza(suite: suite, keyID: entry.keyID,
                                                encapsulatedKey: encapsulatedKey, wrappedKey: wrappedKey))
        }
        let body: [UInt8]
        do {
            let box = try ChaChaPoly.seal(plaintext, using: contentKey, nonce: try ChaChaPoly.Nonce(data: SealedSizes.bodyNonce),
                                          authenticating: SealedNames.bodyAAD(id: id, recipient: recipient))
            body = Array(box.ciphertext) + Array(box.tag)
        } catch {
            throw .sealFailed
        }
        return SealedMessage(id: id, bytes: SealedPayload(sealNonce: sealNonce, stanzas: stanzas, body: body).bytes)
    }

    /// The devices with their parsed keys, or the first reason to refuse.
    static func checkedTargets(recipient: String, devices: [DeviceKeyEntry]) throws(SealingError)
        -> [(DeviceKeyEntry, DeviceKeyCheck.RecipientKey)] {
        guard !devices.isEmpty else { throw .noDevices }
        guard devices.count <= maxDevices else { throw .tooManyDevices(devices.count) }
        do { try Identifier.check(recipient, as: .user) } catch { throw .identifier(error) }
        var seen = Set<KeyID>()
        var targets: [(DeviceKeyEntry, DeviceKeyCheck.RecipientKey)] = []
        targets.reserveCapacity(devices.count)
        for entry in devices {
            do { try Identifier.check(entry.deviceID, as: .deviceID) } catch { throw .identifier(error) }
            guard entry.keyID == SealedNames.keyID(suite: entry.key.suite, deviceID: entry.deviceID, publicKey: entry.key.bytes) else {
                throw .keyIDMismatch(deviceID: entry.deviceID)
            }
            guard seen.insert(entry.keyID).inserted else { throw .duplicateKeyID(entry.keyID) }
            targets.append((entry, try DeviceKeyCheck.recipientKey(suite: entry.key.suite, bytes: entry.key.bytes)))
        }
        return targets
    }

    /// HPKE base mode, single shot, empty aad (7.6-3): the encapsulated key and the sealed content key.
    static func wrap(_ contentKey: [UInt8], to key: DeviceKeyCheck.RecipientKey, suite: KeySuite,
                     info: Data) throws(SealingError) -> (encapsulatedKey: [UInt8], wrappedKey: [UInt8]) {
        do {
            var sender: HPKE.Sender
            switch key {
            case .x25519(let publicKey):
                sender = try HPKE.Sender(recipientKey: publicKey, ciphersuite: suite.hpkeCiphersuite, info: info)
            case .xwing(let publicKey):
                sender = try HPKE.Sender(recipientKey: publicKey, ciphersuite: suite.hpkeCiphersuite, info: info)
            }
            let wrapped = try sender.seal(contentKey)
            return (Array(sender.encapsulatedKey), Array(wrapped))
        } catch {
            // Only a key swift-crypto cannot encapsulate to gets here (X-Wing's ML-KEM half,
            // or an all-zero X25519 agreement inside X-Wing).
            throw .publicKeyRejected(suite: suite)
        }
    }

    /// Bytes from swift-crypto's CSPRNG (BoringSSL's RAND_bytes).
    static func randomBytes(_ count: Int) -> [UInt8] {
        SymmetricKey(size: SymmetricKeySize(bitCount: count * 8)).withUnsafeBytes { Array($0) }
    }
}

/// A user's device keys, each checked (its id, its length, small order) and parsed once:
/// what `Sealer.seal(_:to:)` seals to. Any failure refuses the whole list, so that no
/// device is silently left out.
public struct SealingRecipients: Sendable {
    public let recipient: String
    let targets: [(DeviceKeyEntry, DeviceKeyCheck.RecipientKey)]

    public init(recipient: String, devices: [DeviceKeyEntry]) throws(SealingError) {
        self.recipient = recipient
        targets = try Sealer.checkedTargets(recipient: recipient, devices: devices)
    }

    public var deviceIDs: [String] { targets.map(\.0.deviceID) }
}
