import PushSealing
import PushWire

/// A device key a LOGIN registers ([4.6-5]), as the logic decided it: the registration it
/// replaces the key of (device id and issue time name one registration), the key and the
/// key id computed here (7.6-2), so no backend computes one.
public struct DeviceKeyChange: Sendable, Equatable {
    public var deviceID: String
    /// The registration's issue time (unix ms): a registration enrolled again meanwhile
    /// is another one, and keeps its own key.
    public var issuedAt: UInt64
    public var key: DevicePublicKey
    public var keyID: KeyID

    public init(deviceID: String, issuedAt: UInt64, key: DevicePublicKey) {
        self.deviceID = deviceID
        self.issuedAt = issuedAt
        self.key = key
        keyID = SealedNames.keyID(suite: key.suite, deviceID: deviceID, publicKey: key.bytes)
    }
}

/// A device key as the registry holds it beside an enrolled registration (what KEYS reads).
public struct RegisteredKey: Sendable, Equatable {
    public var deviceID: String
    public var key: DevicePublicKey
    public var keyID: KeyID
    /// The registration's expiry (unix ms): KEYS lists unexpired registrations only ([4.18-1]).
    public var expiresAt: UInt64

    package init(deviceID: String, key: DevicePublicKey, keyID: KeyID, expiresAt: UInt64) {
        self.deviceID = deviceID
        self.key = key
        self.keyID = keyID
        self.expiresAt = expiresAt
    }
}

/// What a backend reads for KEYS: the keys of the user's enrolled registrations that have
/// one, in any order and expired or not (the logic decides which are listed and in what
/// order), and the user's key cursor ([4.18-3]).
public struct UserKeys: Sendable, Equatable {
    public var keys: [RegisteredKey]
    /// The greatest change sequence number among the user's registry entries still kept,
    /// enrolled or revoked; 0 when none is kept.
    public var cursor: UInt64

    public init(keys: [RegisteredKey], cursor: UInt64) {
        self.keys = keys
        self.cursor = cursor
    }
}

/// The columns a registration's key is kept in, as both backends bind and read them.
package enum DeviceKeyColumns {
    /// A key id as an SQL integer: its 64 bits as a signed value.
    package static func stored(_ keyID: KeyID) -> Int64 { Int64(bitPattern: keyID.value) }

    package static func keyID(_ stored: Int64) -> KeyID { KeyID(value: UInt64(bitPattern: stored)) }

    /// A key read back, or nil when the suite is unknown or the length not the suite's
    /// (a row no store wrote): not listed, never handed out as it is.
    package static func key(suite: Int64, bytes: [UInt8]) -> DevicePublicKey? {
        guard suite > 0, suite <= Int64(UInt8.max), let suite = KeySuite(rawValue: UInt8(suite)),
              bytes.count == suite.publicKeyCount else { return nil }
        return DevicePublicKey(suite: suite, bytes: bytes)
    }
}

extension StoreLogic {
    /// LOGIN's key checks that the wire cannot make ([4.6-6]): a suite-1 key of small order.
    /// Made before the limits and the password, and counting for nothing in them.
    static func checkDeviceKey(_ key: DevicePublicKey?) -> Bool {
        guard key != nil else { return true }
        // TODO(store, sealing): call PushSealing's `validatePublicKey(suite:bytes:)` here once it
        // lands on main (branch `sealing`): a small-order X25519 key is BAD_REQUEST ([4.6-6]).
        // Until then only the wire's checks (pairing, suite, length) hold.
        return true
    }

    /// KEYS_OK for what was read ([4.18-1], [4.18-3], [4.18-6]): the unexpired keys in
    /// device id byte order, or TOO_LARGE when the reply would not fit the connection's frame.
    static func keysReply(_ found: UserKeys, nowMs: UInt64, maxFrame: Int) -> Message {
        let listed = found.keys.filter { $0.expiresAt > nowMs }
            .sorted { $0.deviceID.utf8.lexicographicallyPrecedes($1.deviceID.utf8) }
            .map { DeviceKeyEntry(deviceID: $0.deviceID, key: $0.key, keyID: $0.keyID) }
        let packed = listed.reduce(0) { $0 + $1.packedCount }
        let frame = FrameHeader.size + FieldWriter.size(ofValue: 8) + FieldWriter.size(ofValue: packed)
        guard frame <= maxFrame else {
            return .error(ErrorReply(status: .tooLarge,
                                     message: "the keys take \(frame) bytes, more than this connection's max_frame of \(maxFrame)"))
        }
        return .keysOK(KeysOK(cursor: found.cursor, keys: listed))
    }
}
