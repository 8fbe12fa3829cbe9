/// A sealed payload, format version 1 (SPEC.md 7.6), as bytes are laid out; no cryptography.
/// The store checks the structure ([4.19-1]) and cuts each device's view ([4.19-4]) with it;
/// PushSealing seals and opens the parts.
///
/// ```
/// sealed = version (01) || seal_nonce (16) || count (u8, 1...255) || stanza × count || body
/// stanza = key_suite (u8) || key_id (8) || enc (suite's size) || wrapped_key (48)
/// ```
public struct SealedPayload: Equatable, Sendable {
    public static let version: UInt8 = 1
    public static let sealNonceCount = 16
    /// The content key (32 bytes) and its AEAD tag (16).
    public static let wrappedKeyCount = 48
    /// The body's AEAD tag: an empty text seals to 16 bytes.
    public static let bodyTagCount = 16
    public static let maxStanzas = 255

    /// One device's copy of the content key.
    public struct Stanza: Equatable, Sendable {
        public var suite: KeySuite
        public var keyID: KeyID
        /// HPKE's `enc`, `suite.encapsulatedKeyCount` bytes.
        public var encapsulatedKey: [UInt8]
        public var wrappedKey: [UInt8]

        public init(suite: KeySuite, keyID: KeyID, encapsulatedKey: [UInt8], wrappedKey: [UInt8]) {
            self.suite = suite
            self.keyID = keyID
            self.encapsulatedKey = encapsulatedKey
            self.wrappedKey = wrappedKey
        }

        var count: Int { 1 + KeyID.byteCount + encapsulatedKey.count + wrappedKey.count }
    }

    public var sealNonce: [UInt8]
    public var stanzas: [Stanza]
    /// The text sealed under the content key, tag included.
    public var body: [UInt8]

    public init(sealNonce: [UInt8], stanzas: [Stanza], body: [UInt8]) {
        self.sealNonce = sealNonce
        self.stanzas = stanzas
        self.body = body
    }

    /// Parses and checks the structure of [4.19-1]: version 1, one to 255 stanzas of known
    /// suites, no key id twice, a body of at least the tag's 16 bytes.
    public init(parsing bytes: [UInt8]) throws(SealedPayloadError) {
        var reader = ByteReader(bytes)
        let version = try reader.byte()
        guard version == SealedPayload.version else { throw .unsupportedVersion(version) }
        sealNonce = Array(try reader.take(SealedPayload.sealNonceCount))
        let count = Int(try reader.byte())
        guard count > 0 else { throw .noStanza }
        var stanzas: [Stanza] = []
        stanzas.reserveCapacity(count)
        var seen = Set<KeyID>()
        for _ in 0..<count {
            let suiteValue = try reader.byte()
            guard let suite = KeySuite(rawValue: suiteValue) else { throw .unknownSuite(suiteValue) }
            guard let keyID = KeyID(bytes: try reader.take(KeyID.byteCount)) else { throw .truncated }
            guard seen.insert(keyID).inserted else { throw .duplicateKeyID(keyID) }
            let enc = Array(try reader.take(suite.encapsulatedKeyCount))
            let wrapped = Array(try reader.take(SealedPayload.wrappedKeyCount))
            stanzas.append(Stanza(suite: suite, keyID: keyID, encapsulatedKey: enc, wrappedKey: wrapped))
        }
        self.stanzas = stanzas
        body = Array(reader.rest)
        guard body.count >= SealedPayload.bodyTagCount else { throw .bodyTooShort }
    }

    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(2 + sealNonce.count + stanzas.reduce(0) { $0 + $1.count } + body.count)
        out.append(SealedPayload.version)
        out.append(contentsOf: sealNonce)
        out.append(UInt8(truncatingIfNeeded: stanzas.count))
        for stanza in stanzas {
            out.append(stanza.suite.rawValue)
            out.append(contentsOf: stanza.keyID.bytes)
            out.append(contentsOf: stanza.encapsulatedKey)
            out.append(contentsOf: stanza.wrappedKey)
        }
        out.append(contentsOf: body)
        return out
    }

    public func stanza(for keyID: KeyID) -> Stanza? { stanzas.first { $0.keyID == keyID } }

    /// What one device is handed on FETCH ([4.19-4]): the same payload with its stanza
    /// alone, or nil when none was sealed to that key.
    public func deviceView(for keyID: KeyID) -> SealedPayload? {
        stanza(for: keyID).map { SealedPayload(sealNonce: sealNonce, stanzas: [$0], body: body) }
    }
}

public enum SealedPayloadError: Error, Equatable, Sendable, CustomStringConvertible {
    case truncated
    case unsupportedVersion(UInt8)
    case noStanza
    case unknownSuite(UInt8)
    case duplicateKeyID(KeyID)
    case bodyTooShort

    public var description: String {
        switch self {
        case .truncated: "sealed payload ends inside its header or a stanza"
        case .unsupportedVersion(let version): "sealed payload format version \(version) is not 1"
        case .noStanza: "sealed payload has no stanza"
        case .unknownSuite(let suite): "sealed payload names unknown key suite \(suite)"
        case .duplicateKeyID(let keyID): "sealed payload has two stanzas for key \(keyID)"
        case .bodyTooShort: "sealed payload's body is shorter than its 16-byte tag"
        }
    }
}

/// Reads a byte array front to back, refusing to run past its end.
private struct ByteReader {
    private let bytes: [UInt8]
    private var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func take(_ count: Int) throws(SealedPayloadError) -> ArraySlice<UInt8> {
        guard count <= bytes.count - offset else { throw .truncated }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }

    mutating func byte() throws(SealedPayloadError) -> UInt8 {
        guard offset < bytes.count else { throw .truncated }
        defer { offset += 1 }
        return bytes[offset]
    }

    var rest: ArraySlice<UInt8> { bytes[offset...] }
}
