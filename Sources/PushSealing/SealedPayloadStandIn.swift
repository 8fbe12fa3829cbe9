import PushWire

// TEMPORARY: the shape of PushWire/SealedPayload.swift the lead is writing; deleted when it
// lands on main. Not a second parser to keep.

public enum SealedPayloadError: Error, Equatable, Sendable {
    case malformed
}

public struct DeviceKeyEntry: Equatable, Sendable {
    public var deviceID: String
    public var suite: KeySuite
    public var keyID: KeyID
    public var publicKey: [UInt8]
    public init(deviceID: String, suite: KeySuite, keyID: KeyID, publicKey: [UInt8]) {
        self.deviceID = deviceID
        self.suite = suite
        self.keyID = keyID
        self.publicKey = publicKey
    }
}

public struct SealedPayload: Equatable, Sendable {
    public struct Stanza: Equatable, Sendable {
        public var suite: KeySuite
        public var keyID: KeyID
        public var encapsulatedKey: [UInt8]
        public var wrappedKey: [UInt8]
        public init(suite: KeySuite, keyID: KeyID, encapsulatedKey: [UInt8], wrappedKey: [UInt8]) {
            self.suite = suite
            self.keyID = keyID
            self.encapsulatedKey = encapsulatedKey
            self.wrappedKey = wrappedKey
        }
    }

    public var sealNonce: [UInt8]
    public var stanzas: [Stanza]
    public var body: [UInt8]

    public init(sealNonce: [UInt8], stanzas: [Stanza], body: [UInt8]) {
        self.sealNonce = sealNonce
        self.stanzas = stanzas
        self.body = body
    }

    public init(parsing bytes: [UInt8]) throws(SealedPayloadError) {
        guard bytes.count >= 18, bytes[0] == 1, bytes[17] >= 1 else { throw .malformed }
        var offset = 18
        var stanzas: [Stanza] = []
        for _ in 0..<Int(bytes[17]) {
            guard offset + 9 <= bytes.count, let suite = KeySuite(rawValue: bytes[offset]),
                  let keyID = KeyID(bytes: bytes[offset + 1..<offset + 9]) else { throw .malformed }
            let end = offset + 9 + suite.encapsulatedKeyCount + 48
            guard end <= bytes.count else { throw .malformed }
            stanzas.append(Stanza(suite: suite, keyID: keyID,
                                  encapsulatedKey: Array(bytes[offset + 9..<end - 48]), wrappedKey: Array(bytes[end - 48..<end])))
            offset = end
        }
        guard bytes.count - offset >= 16, Set(stanzas.map(\.keyID)).count == stanzas.count else { throw .malformed }
        self.init(sealNonce: Array(bytes[1..<17]), stanzas: stanzas, body: Array(bytes[offset...]))
    }

    public var bytes: [UInt8] {
        var out: [UInt8] = [1] + sealNonce + [UInt8(truncatingIfNeeded: stanzas.count)]
        for stanza in stanzas {
            out.append(stanza.suite.rawValue)
            out += stanza.keyID.bytes + stanza.encapsulatedKey + stanza.wrappedKey
        }
        return out + body
    }

    public func deviceView(for keyID: KeyID) -> SealedPayload? {
        guard let stanza = stanzas.first(where: { $0.keyID == keyID }) else { return nil }
        return SealedPayload(sealNonce: sealNonce, stanzas: [stanza], body: body)
    }
}
