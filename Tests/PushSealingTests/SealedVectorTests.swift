import Crypto
import Foundation
@testable import PushSealing
import PushWire
import Testing

/// protocol/vectors/sealed.txt: 7.6's worked example, sealed by protocol/tools/gen_sealed_vectors.py
/// over pyhpke with fixed ephemeral keys. swift-crypto cannot fix an ephemeral key, so these
/// tests open what Python sealed and recompute every derived name.
struct SealedVector {
    let values: [String: String]

    init() throws {
        let text = String(decoding: try SealingVectorFiles.data("sealed.txt"), as: UTF8.self)
        var values: [String: String] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: " ", maxSplits: 1).map(String.init)
            if parts.count == 2 { values[parts[0]] = parts[1] }
        }
        self.values = values
    }

    func text(_ name: String) throws -> String { try #require(values[name], "sealed.txt has no \(name)") }
    func bytes(_ name: String) throws -> [UInt8] { try hexBytes(try text(name)) }
    var deviceIDs: [String] { (values["devices"] ?? "").split(separator: " ").map(String.init) }

    func pair(_ prefix: String) throws -> DeviceKeyPair {
        try DeviceKeyPair(fileText: "\(try text(prefix + "suite")) \(try text(prefix + "private_key"))\n")
    }
}

@Suite struct SealedVectorTests {
    /// [7.6-1] [7.6-2] [7.6-3] [7.6-4] The derived names of the example: public keys and key ids
    /// from the private keys, the id from seal_nonce, each stanza's info and the body's aad.
    @Test func derivedNames() throws {
        let vector = try SealedVector()
        let recipient = try vector.text("recipient")
        #expect(vector.deviceIDs == ["phone-1", "phone-2", "tablet"])
        let id = SealedNames.payloadID(sealNonce: try vector.bytes("seal_nonce"))
        #expect(id == PayloadID(hex: try vector.text("id")))
        #expect(SealedNames.bodyAAD(id: id, recipient: recipient) == (try vector.bytes("body_aad")))
        for device in vector.deviceIDs {
            let prefix = "device.\(device)."
            let pair = try vector.pair(prefix)
            #expect(pair.publicKey == (try vector.bytes(prefix + "public_key")))
            let keyID = pair.keyID(deviceID: device)
            #expect(keyID == KeyID(hex: try vector.text(prefix + "key_id")))
            #expect(SealedNames.stanzaInfo(id: id, recipient: recipient, deviceID: device, suite: pair.suite, keyID: keyID)
                    == (try vector.bytes(prefix + "info")))
        }
    }

    /// [7.6-5] Each device opens its own view, fetched under the example's id, to the plaintext.
    @Test func eachDeviceOpensItsView() throws {
        let vector = try SealedVector()
        let id = try #require(PayloadID(hex: try vector.text("id")))
        for device in vector.deviceIDs {
            let prefix = "device.\(device)."
            let opened = try Opener.open(try vector.bytes(prefix + "view"), fetchedID: id, user: try vector.text("recipient"),
                                         deviceID: device, key: try vector.pair(prefix))
            #expect(String(decoding: opened, as: UTF8.self) == (try vector.text("plaintext")))
        }
    }

    /// [7.6-5] The full payload parses, its stanzas name the devices in order, and each view
    /// is the store's device view of it; a device enrolled later has none.
    @Test func fullPayloadAndViews() throws {
        let vector = try SealedVector()
        let sealed = try vector.bytes("sealed")
        let payload = try SealedPayload(parsing: sealed)
        #expect(payload.bytes == sealed)
        #expect(payload.sealNonce == (try vector.bytes("seal_nonce")))
        #expect(payload.stanzas.map(\.keyID) == (try vector.deviceIDs.map { try #require(KeyID(hex: try vector.text("device.\($0).key_id"))) }))
        for device in vector.deviceIDs {
            let keyID = try #require(KeyID(hex: try vector.text("device.\(device).key_id")))
            #expect(payload.deviceView(for: keyID)?.bytes == (try vector.bytes("device.\(device).view")))
            let stanza = try #require(payload.stanzas.first { $0.keyID == keyID })
            #expect(stanza.encapsulatedKey == (try vector.bytes("device.\(device).enc")))
        }
        let unsealed = try #require(KeyID(hex: try vector.text("not_sealed.key_id")))
        let lateDevice = try DeviceKeyPair(suite: .x25519, privateKey: try vector.bytes("not_sealed.private_key"))
        #expect(lateDevice.keyID(deviceID: try vector.text("not_sealed.device_id")) == unsealed)
        #expect(payload.deviceView(for: unsealed) == nil)
        // The full payload is no device view.
        let id = try #require(PayloadID(hex: try vector.text("id")))
        #expect(throws: SealingError.notOneStanza(3)) {
            try Opener.open(sealed, fetchedID: id, user: "alice", deviceID: "phone-1", key: try vector.pair("device.phone-1."))
        }
    }

    /// [7.6-3] [7.6-5] The file's moved stanza (phone-1's, relabelled with phone-2's key id)
    /// does not open on phone-2; nor does a view opened as another user or under another id.
    @Test func movedStanzaFromFile() throws {
        let vector = try SealedVector()
        let id = try #require(PayloadID(hex: try vector.text("id")))
        let device = try vector.text("moved.device_id")
        let pair = try vector.pair("device.\(device).")
        #expect(throws: SealingError.stanzaDoesNotOpen) {
            try Opener.open(try vector.bytes("moved.view"), fetchedID: id, user: "alice", deviceID: device, key: pair)
        }
        let view = try vector.bytes("device.\(device).view")
        #expect(throws: SealingError.stanzaDoesNotOpen) {
            try Opener.open(view, fetchedID: id, user: "bob", deviceID: device, key: pair)
        }
        #expect(throws: SealingError.idMismatch) {
            try Opener.open(view, fetchedID: PayloadID(high: id.high, low: id.low ^ 1), user: "alice", deviceID: device, key: pair)
        }
    }

    /// [7.6-1] Swift's sealer, given the example's nonce and content key, writes the same
    /// header and body as Python's (the stanzas differ: their ephemeral keys are fresh).
    @Test func swiftSealerMatchesBody() throws {
        let vector = try SealedVector()
        let entries = try vector.deviceIDs.map { device in
            let pair = try vector.pair("device.\(device).")
            return DeviceKeyEntry(deviceID: device, key: pair.devicePublicKey, keyID: pair.keyID(deviceID: device))
        }
        let sealed = try Sealer.seal(Array(try vector.text("plaintext").utf8), recipient: try vector.text("recipient"), devices: entries,
                                     sealNonce: try vector.bytes("seal_nonce"), contentKey: SymmetricKey(data: try vector.bytes("content_key")))
        let ours = try SealedPayload(parsing: sealed.bytes)
        let theirs = try SealedPayload(parsing: try vector.bytes("sealed"))
        #expect(sealed.id == PayloadID(hex: try vector.text("id")))
        #expect(ours.body == theirs.body)
        #expect(ours.stanzas.map(\.keyID) == theirs.stanzas.map(\.keyID))
        #expect(ours.stanzas.map(\.encapsulatedKey) != theirs.stanzas.map(\.encapsulatedKey))
    }
}
