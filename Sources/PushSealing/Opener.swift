import Crypto
import FoundationEssentials
import PushWire

/// Opens a sealed payload on the device (SPEC.md 7.6-5). Every check of the clause is made
/// here, in its order; a device shows nothing of a payload that fails any of them, only the
/// generic prompt, whatever the error.
public enum Opener {
    /// The plaintext of the device view `view`, fetched under `fetchedID`, for the device
    /// `deviceID` of `user` holding `key`.
    public static func open(_ view: [UInt8], fetchedID: PayloadID, user: String, deviceID: String,
                            key: DeviceKeyPair) throws(SealingError) -> [UInt8] {
        let payload: SealedPayload
        do { payload = try SealedPayload(parsing: view) } catch { throw .malformed(error) }
        guard payload.stanzas.count == 1, let stanza = payload.stanzas.first else {
            throw .notOneStanza(payload.stanzas.count)
        }
        let keyID = key.keyID(deviceID: deviceID)
        guard stanza.suite == key.suite, stanza.keyID == keyID else { throw .notForThisKey }
        guard SealedNames.payloadID(sealNonce: payload.sealNonce) == fetchedID else { throw .idMismatch }
        let info = Data(SealedNames.stanzaInfo(id: fetchedID, recipient: user, deviceID: deviceID,
                                               suite: key.suite, keyID: keyID))
        let contentKey = try unwrap(stanza, with: key, info: info)
        let body = payload.body
        // SealedPayload's parse already requires the tag's 16 bytes; checked again so that a
        // change there cannot turn into a trap here.
        guard body.count >= SealedSizes.tag else { throw .bodyDoesNotOpen }
        do {
            let box = try ChaChaPoly.SealedBox(nonce: try ChaChaPoly.Nonce(data: SealedSizes.bodyNonce),
                                               ciphertext: body[..<(body.count - SealedSizes.tag)],
                                               tag: body[(body.count - SealedSizes.tag)...])
            return Array(try ChaChaPoly.open(box, using: contentKey,
                                             authenticating: SealedNames.bodyAAD(id: fetchedID, recipient: user)))
        } catch {
            throw .bodyDoesNotOpen
        }
    }

    /// The content key from the stanza: HPKE base single-shot Open with empty aad (7.6-3).
    static func unwrap(_ stanza: SealedPayload.Stanza, with key: DeviceKeyPair, info: Data) throws(SealingError) -> SymmetricKey {
        do {
            let encapsulatedKey = Data(stanza.encapsulatedKey)
            var recipient: HPKE.Recipient
            switch key.privateKey {
            case .x25519(let privateKey):
                recipient = try HPKE.Recipient(privateKey: privateKey, ciphersuite: key.suite.hpkeCiphersuite,
                                               info: info, encapsulatedKey: encapsulatedKey)
            case .xwing(let privateKey):
                recipient = try HPKE.Recipient(privateKey: privateKey, ciphersuite: key.suite.hpkeCiphersuite,
                                               info: info, encapsulatedKey: encapsulatedKey)
            }
            let contentKey = try recipient.open(stanza.wrappedKey)
            guard contentKey.count == SealedSizes.contentKey else { throw SealingError.stanzaDoesNotOpen }
            return SymmetricKey(data: contentKey)
        } catch {
            throw .stanzaDoesNotOpen
        }
    }
}
