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
        var stanzas: [Stanza] = []
        let layout = try SealedPayload.scan(bytes) { suite, keyID, stanza in
            let enc = stanza.startIndex + 1 + KeyID.byteCount
            stanzas.append(Stanza(suite: suite, keyID: keyID, encapsulatedKey: Array(bytes[enc..<enc + suite.encapsulatedKeyCount]),
                                  wrappedKey: Array(bytes[(stanza.endIndex - SealedPayload.wrappedKeyCount)..<stanza.endIndex])))
        }
        sealNonce = Array(layout.sealNonce)
        self.stanzas = stanzas
        body = Array(bytes[layout.bodyStart...])
    }

    /// The structure check of [4.19-1] alone, copying nothing: the seal nonce (for the id
    /// of 7.6-1), or the rule the bytes break. The store checks every sealed STORE so.
    public static func check(_ bytes: [UInt8]) throws(SealedPayloadError) -> ArraySlice<UInt8> {
        try scan(bytes) { _, _, _ in }.sealNonce
    }

    /// The device's view of a payload stored after `check` ([4.19-4]), cut from its bytes
    /// in one copy; nil when no stanza is sealed to `keyID` or the bytes are not a payload.
    public static func deviceView(of bytes: [UInt8], for keyID: KeyID) -> [UInt8]? {
        var found: Range<Int>?
        guard let layout = try? scan(bytes, { _, stanzaKeyID, stanza in if stanzaKeyID == keyID { found = stanza } }),
              let found else { return nil }
        var view: [UInt8] = []
        view.reserveCapacity(headerCount + found.count + bytes.count - layout.bodyStart)
        view.append(contentsOf: bytes[0..<(headerCount - 1)])
        view.append(1)
        view.append(contentsOf: bytes[found])
        view.append(contentsOf: bytes[layout.bodyStart...])
        return view
    }

    /// Version, seal nonce and count.
    private static let headerCount = 2 + sealNonceCount

    /// Walks the parts in order, checking every rule of [4.19-1] (7.6-6) as it goes, and
    /// hands each stanza's suite, key id and byte range to `visit`. The one reader of the
    /// format: parsing, the store's check and the view are all made with it.
    private static func scan(_ bytes: [UInt8], _ visit: (KeySuite, KeyID, Range<Int>) -> Void)
        throws(SealedPayloadError) -> (sealNonce: ArraySlice<UInt8>, bodyStart: Int) {
        guard bytes.count >= headerCount else { throw .truncated }
        guard bytes[0] == version else { throw .unsupportedVersion(bytes[0]) }
        let count = Int(bytes[headerCount - 1])
        guard count > 0 else { throw .noStanza }
        // At most 255 ids: a linear search beats a hash set's allocation at the usual handful.
        var seen: [UInt64] = []
        seen.reserveCapacity(count)
        var offset = headerCount
        for _ in 0..<count {
            guard offset < bytes.count else { throw .truncated }
            guard let suite = KeySuite(rawValue: bytes[offset]) else { throw .unknownSuite(bytes[offset]) }
            let length = 1 + KeyID.byteCount + suite.encapsulatedKeyCount + wrappedKeyCount
            guard length <= bytes.count - offset else { throw .truncated }
            let keyID = KeyID(value: bytes[(offset + 1)..<(offset + 1 + KeyID.byteCount)].reduce(0) { $0 << 8 | UInt64($1) })
            guard !seen.contains(keyID.value) else { throw .duplicateKeyID(keyID) }
            seen.append(keyID.value)
            visit(suite, keyID, offset..<(offset + length))
            offset += length
        }
        guard bytes.count - offset >= bodyTagCount else { throw .bodyTooShort }
        return (bytes[1..<headerCount - 1], offset)
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
