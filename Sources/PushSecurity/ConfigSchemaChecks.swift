import PushWire

/// What is wrong with one `key = value` line of the config file.
public enum ConfigProblem: Equatable, Sendable {
    /// No such key; `suggestion` is a close name the file does accept.
    case unknownKey(suggestion: String?)
    /// The value does not fit the key: `expected` says what would.
    case invalidValue(expected: String)
}

extension ConfigSchema {
    /// Why `name = value` cannot be used, or nil when it can.
    public static func problem(name: String, value: String) -> ConfigProblem? {
        guard let (key, _) = key(named: name) else { return .unknownKey(suggestion: suggestion(for: name)) }
        return valueProblem(key.kind, value).map { .invalidValue(expected: $0) }
    }

    /// Why `value` does not fit `kind`, in words naming what would, or nil.
    static func valueProblem(_ kind: ConfigKey.Kind, _ value: String) -> String? {
        // Paths, URLs and names go to C as they are: one with a control character (a NUL
        // would cut it there) is refused whatever the key ([3.3-8]).
        if let found = Identifier.controlCharacter(in: value) {
            return "a value without control characters (it has \(Identifier.notation(found.scalar)) at byte \(found.offset))"
        }
        switch kind {
        case .address:
            return addressProblem(value).map { "HOST:PORT (\($0))" }
        case .addressList:
            let elements = value.split(separator: ",", omittingEmptySubsequences: false)
            for (index, element) in elements.enumerated() {
                let trimmed = String(element.drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
                let which = elements.count > 1 ? "address \(index + 1) of \(elements.count): " : ""
                if let problem = trimmed.isEmpty ? "empty" : addressProblem(trimmed) {
                    return "HOST:PORT[,HOST:PORT...] (\(which)\(problem))"
                }
            }
            return nil
        case .integer(let range):
            guard let number = Int(value), range.contains(number) else {
                return "an integer from \(range.lowerBound) to \(range.upperBound)"
            }
            return nil
        case .choice(let choices):
            return choices.contains(value) ? nil : list(choices, conjunction: "or")
        case .databaseURL:
            return databaseURLProblem(value).map { "a postgresql:// URL (\($0))" }
        case .natsURLList:
            return natsURLListProblem(value).map { "nats://HOST:PORT[,tls://HOST:PORT...] (\($0))" }
        case .nodeName:
            return nodeNameProblem(value).map { "a node name (\($0))" }
        case .absolutePath:
            return value.hasPrefix("/") && value.count > 1 ? nil : "an absolute path, as in /srv/push/file"
        case .word:
            let printable = !value.isEmpty && value.utf8.allSatisfy { $0 > 0x20 && $0 != 0x7F }
            return printable ? nil : "one word, without spaces"
        }
    }

    /// Checks NATS server URLs by their shape: `nats://HOST:PORT` or `tls://HOST:PORT`,
    /// comma-separated. Credentials in a URL are refused, and not repeated in the answer:
    /// they would sit on the command line or in the config file in clear, and in logs.
    public static func natsURLListProblem(_ text: String) -> String? {
        let elements = text.split(separator: ",", omittingEmptySubsequences: false)
        for (index, element) in elements.enumerated() {
            let which = elements.count > 1 ? "URL \(index + 1) of \(elements.count): " : ""
            guard let scheme = ["nats://", "tls://"].first(where: { element.hasPrefix($0) }) else {
                return which + "it must start with nats:// or tls://"
            }
            if element.contains("@") {
                return which + "credentials do not go in the URL: use a user and password file, a token file or a credentials file"
            }
            if let problem = addressProblem(String(element.dropFirst(scheme.count))) { return which + problem }
        }
        return nil
    }

    /// The value as an error may show it: a NATS URL list without what precedes an `@`.
    public static func displayValue(_ value: String, of kind: ConfigKey.Kind) -> String {
        if Identifier.controlCharacter(in: value) != nil { return String(value.debugDescription.dropFirst().dropLast()) }
        guard kind == .natsURLList, value.contains("@") else { return value }
        return value.split(separator: ",", omittingEmptySubsequences: false).map { element in
            guard let at = element.lastIndex(of: "@") else { return String(element) }
            var start = element.startIndex
            if let colon = element.firstIndex(of: ":"), element[colon...].hasPrefix("://") { start = element.index(colon, offsetBy: 3) }
            return start <= at ? String(element[..<start]) + "***" + String(element[at...]) : String(element)
        }.joined(separator: ",")
    }

    /// A node name becomes a NATS subject token: 1 to 64 letters, digits, `-` or `_`.
    public static func nodeNameProblem(_ text: String) -> String? {
        guard !text.isEmpty, text.utf8.count <= 64 else { return "1 to 64 characters" }
        let allowed = text.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
        }
        return allowed ? nil : "only letters, digits, '-' and '_'"
    }

    /// Checks a PostgreSQL URL by its shape alone; libpq reads the rest when the store connects.
    public static func databaseURLProblem(_ text: String) -> String? {
        guard let scheme = ["postgresql://", "postgres://"].first(where: { text.hasPrefix($0) }) else {
            return "it must start with postgresql:// or postgres://"
        }
        guard text.count > scheme.count else { return "no host or database after \(scheme)" }
        guard !text.contains(where: { $0 == " " || $0 == "\n" || $0 == "\t" }) else { return "it must not contain spaces" }
        return nil
    }

    /// Checks `HOST:PORT` by its syntax alone (no lookup, so a name that does not resolve
    /// here still passes): a non-empty host, an IPv6 host in brackets, a port 0 to 65535.
    public static func addressProblem(_ text: String) -> String? {
        let host: Substring
        let port: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return "no ] after the IPv6 address" }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { return "no :PORT after the ]" }
            port = rest.dropFirst()
            guard host.contains(":"), host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." || $0 == "%" || $0.isLetter || $0.isNumber })
            else { return "'\(host)' in brackets is not an IPv6 address" }
        } else {
            guard let colon = text.lastIndex(of: ":") else { return "no :PORT" }
            host = text[..<colon]
            port = text[text.index(after: colon)...]
            if host.contains(":") { return "an IPv6 address goes in brackets, as in [::1]:7070" }
            guard host.allSatisfy({ ($0.isASCII && ($0.isLetter || $0.isNumber)) || $0 == "." || $0 == "-" || $0 == "_" }) else {
                return "'\(host)' is not a host name or address"
            }
        }
        guard !host.isEmpty else { return "the host is empty" }
        guard !port.isEmpty, port.count <= 5, port.allSatisfy({ $0.isASCII && $0.isNumber }), let number = Int(port), number <= 65_535 else {
            return "the port must be 0 to 65535"
        }
        return nil
    }

    /// The accepted name closest to a misspelt one, if any is close: the same name in
    /// other case, the same key under another prefix (`gateway.max_payload_bytes`), one
    /// name a prefix of the other (`store.max_payload`), or a small edit distance.
    static func suggestion(for name: String) -> String? {
        let names = keys.flatMap(\.acceptedNames)
        let lowered = name.lowercased()
        if let exact = names.first(where: { $0.lowercased() == lowered }) { return exact }
        func unprefixed(_ name: String) -> Substring { name.split(separator: ".", maxSplits: 1).last ?? Substring(name) }
        if let moved = names.first(where: { unprefixed($0) == unprefixed(lowered) }) { return moved }
        if lowered.count >= 6, let longer = names.first(where: { $0.hasPrefix(lowered) || lowered.hasPrefix($0) }) { return longer }
        let scored = names.map { (name: $0, distance: editDistance(lowered, $0)) }
        guard let best = scored.min(by: { $0.distance < $1.distance }) else { return nil }
        return best.distance <= max(2, name.count / 3) ? best.name : nil
    }

    /// Levenshtein distance over characters.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}
