import PushSecurity

/// A provider API token as the store's database keeps it: never the secret, only its hash.
public struct APITokenRecord: Sendable, Equatable {
    /// 12 lowercase hex digits: the lookup key, safe to log and show.
    public var id: String
    /// The provider name the token authenticates as (`APIToken.isValidProviderName`).
    public var provider: String
    /// `APIToken.hash` of the secret.
    public var secretHash: [UInt8]
    /// Unix ms.
    public var createdAt: UInt64
    /// Unix ms; nil while the token is active.
    public var revokedAt: UInt64?
    /// What the token may do.
    public var scopes: APITokenScopes

    public init(id: String, provider: String, secretHash: [UInt8], createdAt: UInt64, revokedAt: UInt64? = nil,
                scopes: APITokenScopes = .all) {
        self.id = id
        self.provider = provider
        self.secretHash = secretHash
        self.createdAt = createdAt
        self.revokedAt = revokedAt
        self.scopes = scopes
    }

    public var isRevoked: Bool { revokedAt != nil }
}

/// What an API token may do: send (POST /v1/messages), read a message's status (GET),
/// recall one (DELETE) and read a recipient's device keys (GET /v1/recipients/{name}/keys,
/// [4.18]). A backend that only sends is given a token that only sends. Status and recall
/// reach the messages the token's own provider sent; `any-provider` widens them to every
/// provider's, for an operator's tool ([4.12-4]), and grants nothing by itself.
public struct APITokenScopes: OptionSet, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    public static let send = APITokenScopes(rawValue: 1)
    public static let status = APITokenScopes(rawValue: 2)
    public static let recall = APITokenScopes(rawValue: 4)
    /// Status and recall reach the messages of every provider, not only the token's own.
    public static let anyProvider = APITokenScopes(rawValue: 8)
    /// Reads any recipient's device keys, which are public ([4.18-4]).
    public static let keys = APITokenScopes(rawValue: 16)
    /// What a token is given when nothing else is asked: its own provider's messages only,
    /// and the keys to seal them with. A token made before `keys` existed keeps the three
    /// scopes it was stored with (`messages`): what it may do does not grow by itself.
    public static let all: APITokenScopes = [.send, .status, .recall, .keys]
    /// The default of the builds before `keys`, which most earlier tokens hold.
    public static let messages: APITokenScopes = [.send, .status, .recall]

    private static let names: [(String, APITokenScopes)] = [("send", .send), ("status", .status), ("recall", .recall),
                                                            ("keys", .keys), ("any-provider", .anyProvider)]

    /// Comma-separated names, as stored and as `--scope` takes them: "send,status,recall".
    public var description: String {
        APITokenScopes.names.filter { contains($0.1) }.map(\.0).joined(separator: ",")
    }

    /// Parses comma-separated names; nil for an unknown name or none at all.
    public init?(names text: String) {
        // What nearly every token holds, read on every request of the HTTP API.
        if text == "send,status,recall,keys" {
            self = .all
            return
        }
        if text == "send,status,recall" {
            self = .messages
            return
        }
        var scopes: APITokenScopes = []
        for name in text.split(separator: ",", omittingEmptySubsequences: false) {
            let trimmed = name.trimmingCharacters(in: " ")
            guard let found = APITokenScopes.names.first(where: { $0.0 == trimmed }) else { return nil }
            scopes.insert(found.1)
        }
        guard !scopes.isEmpty else { return nil }
        self = scopes
    }
}

extension Substring {
    fileprivate func trimmingCharacters(in character: Character) -> Substring {
        var text = self
        while text.first == character { text.removeFirst() }
        while text.last == character { text.removeLast() }
        return text
    }
}

/// Why a token could not be minted, stored, listed or revoked.
public enum APITokenError: Error, Sendable, Equatable, CustomStringConvertible {
    case invalidProviderName(String)
    case unknownID(String)
    case randomUnavailable
    /// The database failed (its message; never a secret).
    case storage(String)

    public var description: String {
        switch self {
        case .invalidProviderName(let name):
            "invalid provider name '\(name.prefix(80))': 1 to 64 characters, letters, digits, '-', '_' or '.'"
        case .unknownID(let id): "no API token with id '\(id.prefix(80))'"
        case .randomUnavailable: "the system random generator failed"
        case .storage(let message): message
        }
    }
}

/// Provider API tokens: `sp_<id>_<secret>`, where `id` is 12 random lowercase hex digits
/// and `secret` is 32 random bytes in base64url without padding (43 characters).
public enum APIToken {
    public static let prefix = "sp_"
    public static let idLength = 12
    public static let secretByteCount = 32
    /// base64url of 32 bytes, unpadded.
    static let secretTextLength = 43
    /// The whole text: "sp_" + id + "_" + secret.
    public static let textLength = 3 + idLength + 1 + secretTextLength

    /// Parses the bearer text; nil if it is not of the token's shape (never throws on peer input).
    public static func parse(_ text: String) -> (id: String, secret: [UInt8])? {
        let utf8 = Array(text.utf8.prefix(textLength + 1))
        guard utf8.count == textLength, utf8.starts(with: prefix.utf8), utf8[prefix.utf8.count + idLength] == UInt8(ascii: "_") else {
            return nil
        }
        let idBytes = utf8[prefix.utf8.count..<prefix.utf8.count + idLength]
        guard isValidID(idBytes) else { return nil }
        guard let secret = Base64URL.decode(utf8[(prefix.utf8.count + idLength + 1)...]), secret.count == secretByteCount else {
            return nil
        }
        return (String(decoding: idBytes, as: UTF8.self), secret)
    }

    /// A new token for `provider`: the text to show once, and the record to store.
    public static func mint(provider: String, scopes: APITokenScopes = .all, nowMs: UInt64) throws(APITokenError)
        -> (text: String, record: APITokenRecord) {
        guard isValidProviderName(provider) else { throw .invalidProviderName(provider) }
        let idBytes: [UInt8]
        let secret: [UInt8]
        do {
            idBytes = try SecureRandom.bytes(idLength / 2)
            secret = try SecureRandom.bytes(secretByteCount)
        } catch {
            throw .randomUnavailable
        }
        let id = idBytes.map { byte in String(byte >> 4, radix: 16) + String(byte & 0xF, radix: 16) }.joined()
        let text = prefix + id + "_" + Base64URL.encode(secret)
        return (text, APITokenRecord(id: id, provider: provider, secretHash: hash(secret), createdAt: nowMs, scopes: scopes))
    }

    /// Whether `secret` is that of `record` and the record is not revoked (constant-time).
    public static func accepts(_ secret: [UInt8], _ record: APITokenRecord) -> Bool {
        let matches = hash(secret).withUnsafeBytes { given in
            record.secretHash.withUnsafeBytes { stored in HMACSHA256.constantTimeEqual(given, stored) }
        }
        return matches && record.revokedAt == nil
    }

    /// 1 to 64 characters: ASCII letters, digits, '-', '_', '.'.
    public static func isValidProviderName(_ name: String) -> Bool {
        let utf8 = name.utf8
        guard !utf8.isEmpty, utf8.count <= 64 else { return false }
        return utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
                true
            default:
                false
            }
        }
    }

    /// Whether `id` is of a token id's shape (12 lowercase hex digits).
    public static func isValidID(_ id: String) -> Bool { isValidID(Array(id.utf8)[...]) }

    static func isValidID(_ bytes: some Collection<UInt8>) -> Bool {
        bytes.count == idLength && bytes.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }
    }

    /// What the database keeps of a secret. A fast hash is enough: the secret is 256 random
    /// bits, so there is nothing to guess; the label keeps the digest to this one use.
    static func hash(_ secret: [UInt8]) -> [UInt8] {
        HMACSHA256.authenticate(secret, key: Array("securepush-api-token-v1".utf8))
    }
}

/// base64url without padding (RFC 4648 section 5), strict: decoding refuses padding,
/// other alphabets, and unused low bits that are not zero (so each secret has one text).
enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            var value: UInt32 = 0
            for (offset, byte) in chunk.enumerated() { value |= UInt32(byte) << (16 - 8 * offset) }
            for position in 0..<(chunk.count + 1) { out.append(alphabet[Int((value >> (18 - 6 * position)) & 0x3F)]) }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func decode(_ text: some Collection<UInt8>) -> [UInt8]? {
        guard text.count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(text.count * 3 / 4)
        var buffer: UInt32 = 0
        var bits = 0
        for character in text {
            guard let value = sextet(character) else { return nil }
            buffer = buffer << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
                buffer &= (1 << UInt32(bits)) - 1
            }
        }
        guard buffer == 0 else { return nil }
        return out
    }

    private static func sextet(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): character - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): character - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): 62
        case UInt8(ascii: "_"): 63
        default: nil
        }
    }
}
