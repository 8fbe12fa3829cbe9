@testable import PushSealing
import PushWire

/// A device with its key pair, and the entry KEYS would list for it.
struct TestDevice {
    let deviceID: String
    let pair: DeviceKeyPair

    init(_ deviceID: String, suite: KeySuite = .x25519) throws {
        self.deviceID = deviceID
        pair = try DeviceKeyPair.generate(suite: suite)
    }

    init(_ deviceID: String, pair: DeviceKeyPair) {
        self.deviceID = deviceID
        self.pair = pair
    }

    var keyID: KeyID { pair.keyID(deviceID: deviceID) }

    var entry: DeviceKeyEntry {
        DeviceKeyEntry(deviceID: deviceID, key: pair.devicePublicKey, keyID: keyID)
    }

    /// What FETCH_OK would carry for this device: the store's device view.
    func view(of sealed: SealedMessage) throws -> [UInt8]? {
        try SealedPayload(parsing: sealed.bytes).deviceView(for: keyID)?.bytes
    }

    func open(_ view: [UInt8], id: PayloadID, user: String = "alice") throws(SealingError) -> [UInt8] {
        try Opener.open(view, fetchedID: id, user: user, deviceID: deviceID, key: pair)
    }
}

/// Offsets in a suite-1 device view: version, seal_nonce, count, then the stanza.
enum ViewLayout {
    static let stanza = 18
    static let keyID = 19..<27
    static let stanzaEnd = 18 + 1 + 8 + 32 + 48
}
