/// A device's public key as LOGIN registers it ([4.6-5]): its suite and raw bytes, whose
/// length is the suite's ([4.6-6]).
public struct DevicePublicKey: Equatable, Sendable {
    public var suite: KeySuite
    public var bytes: [UInt8]

    public init(suite: KeySuite, bytes: [UInt8]) {
        self.suite = suite
        self.bytes = bytes
    }
}

/// One entry of KEYS_OK's `keys` ([4.18-2]): a device's current key and its id.
public struct DeviceKeyEntry: Equatable, Sendable {
    public var deviceID: String
    public var key: DevicePublicKey
    public var keyID: KeyID

    public init(deviceID: String, key: DevicePublicKey, keyID: KeyID) {
        self.deviceID = deviceID
        self.key = key
        self.keyID = keyID
    }

    /// `device_id_len (u8) || device_id || key_suite (u8) || key_id (8) || key_len (u16) || device_key`.
    public func write(into out: inout [UInt8]) {
        let name = Array(deviceID.utf8)
        out.append(UInt8(truncatingIfNeeded: name.count))
        out.append(contentsOf: name)
        out.append(key.suite.rawValue)
        out.append(contentsOf: keyID.bytes)
        out.append(UInt8(truncatingIfNeeded: key.bytes.count >> 8))
        out.append(UInt8(truncatingIfNeeded: key.bytes.count))
        out.append(contentsOf: key.bytes)
    }

    /// Bytes `write` appends.
    public var packedCount: Int { 1 + deviceID.utf8.count + 1 + KeyID.byteCount + 2 + key.bytes.count }

    /// The entries of a `keys` value, which must divide exactly; a device id that is not an
    /// identifier ([3.3-8]), an unknown suite or a key of the wrong length is malformed.
    public static func unpack(_ value: [UInt8]) throws(WireError) -> [DeviceKeyEntry] {
        var entries: [DeviceKeyEntry] = []
        var offset = 0
        func take(_ count: Int) throws(WireError) -> ArraySlice<UInt8> {
            guard count <= value.count - offset else { throw .badFieldValue(.keys) }
            defer { offset += count }
            return value[offset..<offset + count]
        }
        while offset < value.count {
            let nameCount = Int(try take(1).first ?? 0)
            let name = Array(try take(nameCount))
            do { try FieldTag.deviceID.check(name) } catch { throw .badFieldValue(.keys) }
            guard nameCount > 0, let suite = KeySuite(rawValue: try take(1).first ?? 0),
                  let keyID = KeyID(bytes: try take(KeyID.byteCount)) else { throw .badFieldValue(.keys) }
            let lengthBytes = try take(2)
            let keyCount = Int(lengthBytes[lengthBytes.startIndex]) << 8 | Int(lengthBytes[lengthBytes.startIndex + 1])
            guard keyCount == suite.publicKeyCount else { throw .badFieldValue(.keys) }
            let key = DevicePublicKey(suite: suite, bytes: Array(try take(keyCount)))
            entries.append(DeviceKeyEntry(deviceID: String(decoding: name, as: UTF8.self), key: key, keyID: keyID))
        }
        return entries
    }
}

/// KEYS: a provider reads the current device keys of one user ([4.18]).
public struct Keys: WireMessage {
    public static let type = MessageType.keys
    public static let fieldTable: FieldTable = [.user]

    public var user: String

    public init(user: String) { self.user = user }

    public init(fields: FieldSet) throws(WireError) {
        user = try fields.required(.user, FieldSet.string)
    }

    public func writeFields(to writer: inout FieldWriter) {
        writer.append(.user, user)
    }
}

/// KEYS_OK: the keys, in device id byte order, and the registry cursor that tells a cache
/// whether they changed ([4.18-3]).
public struct KeysOK: WireMessage {
    public static let type = MessageType.keysOK
    public static let fieldTable: FieldTable = [.cursor, .keys]

    public var cursor: UInt64
    public var keys: [DeviceKeyEntry]

    public init(cursor: UInt64, keys: [DeviceKeyEntry]) {
        self.cursor = cursor
        self.keys = keys
    }

    public init(fields: FieldSet) throws(WireError) {
        cursor = try fields.required(.cursor, FieldSet.uint64)
        keys = try DeviceKeyEntry.unpack(try fields.required(.keys, FieldSet.bytes))
    }

    public func writeFields(to writer: inout FieldWriter) {
        writer.append(.cursor, cursor)
        var packed: [UInt8] = []
        packed.reserveCapacity(keys.reduce(0) { $0 + $1.packedCount })
        for entry in keys { entry.write(into: &packed) }
        writer.append(.keys, packed)
    }
}

/// What a STORE's or SEND's content is, told by the tag that carries it ([4.19]): plain
/// (`payload`), sealed by the provider (`sealed_payload`), or plain for the store to seal
/// on arrival (`payload_to_seal`). New tags rather than a flag beside `payload`: a receiver
/// of revision 1.4 skips them, finds `payload` missing and refuses the request, so it never
/// keeps sealed bytes or text to be sealed as a plain payload.
public enum PayloadForm: UInt8, Sendable, CaseIterable {
    case plain
    case sealed
    case sealOnArrival

    public var tag: FieldTag {
        switch self {
        case .plain: .payload
        case .sealed: .sealedPayload
        case .sealOnArrival: .payloadToSeal
        }
    }
}

extension FieldSet {
    /// The one content field of a STORE or SEND: exactly one of the three is present.
    func payloadContent() throws(WireError) -> (form: PayloadForm, bytes: [UInt8]) {
        var found: (form: PayloadForm, bytes: [UInt8])?
        for form in PayloadForm.allCases {
            guard let bytes = bytes(form.tag) else { continue }
            if let found { throw .exclusiveFields(found.form.tag, form.tag) }
            found = (form, bytes)
        }
        guard let found else { throw .missingField(.payload) }
        return found
    }

    /// LOGIN's key: `key_suite` and `device_key` together or not at all ([4.6-6]).
    func devicePublicKey() throws(WireError) -> DevicePublicKey? {
        let suiteValue = try uint8(.keySuite, in: 1...UInt8(KeySuite.allCases.count))
        let bytes = bytes(.deviceKey)
        switch (suiteValue.flatMap(KeySuite.init(rawValue:)), bytes) {
        case (nil, nil): return nil
        case (nil, _): throw .missingField(.keySuite)
        case (_, nil): throw .missingField(.deviceKey)
        case (let suite?, let bytes?):
            guard bytes.count == suite.publicKeyCount else { throw .badFieldValue(.deviceKey) }
            return DevicePublicKey(suite: suite, bytes: bytes)
        }
    }
}
