import PushWire

/// One command line of a provider session (`securepush provider session`, the contract's
/// Appendix B.3), parsed: `<tag> SEND <user> <hex> [ttl=<seconds>] [key=<key>]`,
/// `<tag> STORE <user> <hex> [ttl=<seconds>]`, `<tag> PUSH <user> <id>`, `<tag> RECALL <id>`.
/// Words are separated by spaces or tabs; the verb is in capitals; hex digits in either case.
public struct ProviderSessionLine: Equatable, Sendable {
    public enum Action: Equatable, Sendable {
        case send(user: String, payload: [UInt8], ttlSeconds: UInt32?, idempotencyKey: String?)
        case store(user: String, payload: [UInt8], ttlSeconds: UInt32?)
        case push(user: String, id: PayloadID)
        case recall(PayloadID)
    }

    /// A line that does not parse, with its tag when the first word is one.
    public struct Invalid: Error, Equatable, Sendable {
        public var tag: String?
        public var reason: String
    }

    public var tag: String
    public var action: Action

    public init(tag: String, action: Action) {
        self.tag = tag
        self.action = action
    }

    /// 1 to 16 of [A-Za-z0-9_-].
    public static func isTag(_ word: Substring) -> Bool {
        (1...16).contains(word.utf8.count) && word.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "-"):
                true
            default:
                false
            }
        }
    }

    public static func parse(_ line: Substring) -> Result<ProviderSessionLine, Invalid> {
        let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
        guard let first = words.first, isTag(first) else { return .failure(Invalid(tag: nil, reason: "no tag")) }
        let tag = String(first)
        func invalid(_ reason: String) -> Result<ProviderSessionLine, Invalid> { .failure(Invalid(tag: tag, reason: reason)) }
        guard words.count >= 2 else { return invalid("no command") }
        let arguments = Array(words.dropFirst(2))
        switch words[1] {
        case "SEND", "STORE":
            let sending = words[1] == "SEND"
            guard arguments.count >= 2 else { return invalid("\(words[1]) needs a user and the payload in hex") }
            guard let payload = [UInt8](hex: String(arguments[1])) else { return invalid("the payload is not hex digits") }
            let options: [String: String]
            switch parseOptions(arguments.dropFirst(2), allowed: sending ? ["ttl", "key"] : ["ttl"]) {
            case .success(let parsed): options = parsed
            case .failure(let error): return invalid(error.description)
            }
            var ttl: UInt32?
            if let text = options["ttl"] {
                guard let seconds = UInt32(text), seconds > 0 else { return invalid("ttl is not a number of seconds") }
                ttl = seconds
            }
            let user = String(arguments[0])
            let action: Action = sending ? .send(user: user, payload: payload, ttlSeconds: ttl, idempotencyKey: options["key"])
                : .store(user: user, payload: payload, ttlSeconds: ttl)
            return .success(ProviderSessionLine(tag: tag, action: action))
        case "PUSH":
            guard arguments.count == 2 else { return invalid("PUSH takes a user and an id") }
            guard let id = payloadID(arguments[1]) else { return invalid("the id is not 32 hex digits") }
            return .success(ProviderSessionLine(tag: tag, action: .push(user: String(arguments[0]), id: id)))
        case "RECALL":
            guard arguments.count == 1, let id = payloadID(arguments[0]) else { return invalid("RECALL takes an id of 32 hex digits") }
            return .success(ProviderSessionLine(tag: tag, action: .recall(id)))
        default:
            return invalid("unknown command \(words[1])")
        }
    }

    private static func payloadID(_ word: Substring) -> PayloadID? {
        guard word.utf8.count == 2 * PayloadID.byteCount, let bytes = [UInt8](hex: String(word)) else { return nil }
        return PayloadID(bytes: bytes)
    }

    /// `name=value` words, each name at most once and among `allowed`; the value not empty.
    private static func parseOptions(_ words: ArraySlice<Substring>, allowed: Set<String>) -> Result<[String: String], OptionError> {
        var options: [String: String] = [:]
        for word in words {
            guard let equals = word.firstIndex(of: "=") else { return .failure(OptionError("unexpected word \(word)")) }
            let name = String(word[..<equals])
            let value = String(word[word.index(after: equals)...])
            guard allowed.contains(name), !value.isEmpty, options[name] == nil else {
                return .failure(OptionError("bad option \(word)"))
            }
            options[name] = value
        }
        return .success(options)
    }

    private struct OptionError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}
