import PushSealing
import PushWire
import Testing

@Suite struct SealedNamesTests {
    /// [7.6-1] The id is SHA-256 over the label and the nonce, cut to 16 bytes.
    /// Reference: Python's `hashlib.sha256(b"securepush sealed id v1" + bytes(16)).hexdigest()[:32]`.
    @Test func payloadIDOfZeroNonce() {
        let id = SealedNames.payloadID(sealNonce: [UInt8](repeating: 0, count: 16))
        #expect(id.description == "c81dafc5ce3be46c2ae60b8ecefde494")
        #expect(id != SealedNames.payloadID(sealNonce: [UInt8](repeating: 1, count: 16)))
    }

    /// [7.6-2] The key id binds the device id: the same key on two devices has two ids.
    @Test func keyIDBindsDevice() {
        let key = [UInt8](repeating: 9, count: 32)
        let phone = SealedNames.keyID(suite: .x25519, deviceID: "phone", publicKey: key)
        let tablet = SealedNames.keyID(suite: .x25519, deviceID: "tablet", publicKey: key)
        #expect(phone != tablet)
        #expect(phone == SealedNames.keyID(suite: .x25519, deviceID: "phone", publicKey: key))
        #expect(KeyID(hex: phone.description) == phone)
        #expect(KeyID(bytes: phone.bytes) == phone)
    }
}
