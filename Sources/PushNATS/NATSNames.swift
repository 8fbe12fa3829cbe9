/// Checks on what callers hand over before any of it reaches the wire: a subject with a
/// space would be split into another protocol field by the server, so it is refused here.
public enum NATSNames {
    /// A subject to publish or subscribe to: dot-separated, non-empty tokens of printable
    /// ASCII or UTF-8 without whitespace. Wildcards (`*`, `>`) pass only when `wildcards`.
    static func checkSubject(_ subject: String, wildcards: Bool = false) throws(NATSError) {
        guard !subject.isEmpty, subject.utf8.count <= 4096 else { throw .invalidSubject(subject) }
        let tokens = subject.split(separator: ".", omittingEmptySubsequences: false)
        for (index, token) in tokens.enumerated() {
            guard !token.isEmpty else { throw .invalidSubject(subject) }
            for byte in token.utf8 where byte <= 0x20 || byte == 0x7F {
                throw .invalidSubject(subject)
            }
            if token.contains("*") || token.contains(">") {
                guard wildcards else { throw .invalidSubject(subject) }
                // A wildcard is a whole token, and `>` only the last one.
                guard token == "*" || (token == ">" && index == tokens.count - 1) else { throw .invalidSubject(subject) }
            }
        }
    }

    /// A stream name: one token (it becomes part of API subjects), no wildcards.
    static func checkStreamName(_ name: String) throws(NATSError) {
        guard !name.isEmpty, !name.contains("."), !name.contains("/"), !name.contains("\\") else {
            throw .invalidSubject(name)
        }
        try checkSubject(name)
    }

    /// A header name or value: no CR or LF, which would end the header block early, and no
    /// NUL, at which libnats would cut it (it takes C strings); a name also without ':' or
    /// whitespace.
    static func checkHeader(_ name: String, _ value: String) throws(NATSError) {
        guard !name.isEmpty, !name.utf8.contains(where: { $0 <= 0x20 || $0 == 0x3A || $0 == 0x7F }),
              !value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 })
        else { throw .invalidSubject("header \(name)") }
    }

    /// `nats://HOST:PORT` (or `tls://`): a host without whitespace and a port in 1...65535.
    /// libnats parses URLs itself; this only keeps a typo from becoming a connection that
    /// retries for ever against nothing.
    static func checkServer(_ url: String) throws(NATSError) {
        let schemes = ["nats://", "tls://"]
        guard let scheme = schemes.first(where: { url.hasPrefix($0) }) else { throw .invalidURL(url) }
        var rest = Substring(url.dropFirst(scheme.count))
        if let at = rest.lastIndex(of: "@") { rest = rest[rest.index(after: at)...] }
        guard let colon = rest.lastIndex(of: ":") else { throw .invalidURL(url) }
        let host = rest[..<colon]
        let portText = rest[rest.index(after: colon)...]
        guard !host.isEmpty, !host.utf8.contains(where: { $0 <= 0x20 || $0 == 0x2F || $0 == 0x7F }),
              !portText.isEmpty, portText.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let port = Int(portText), (1...65535).contains(port)
        else { throw .invalidURL(url) }
    }

    /// The URL with any `user:password@` or `token@` replaced by `***@`, for logs and errors.
    public static func redacted(_ url: String) -> String {
        guard let at = url.lastIndex(of: "@") else { return url }
        var start = url.startIndex
        if let colon = url.firstIndex(of: ":"), url[colon...].hasPrefix("://") { start = url.index(colon, offsetBy: 3) }
        guard start <= at else { return url }
        return String(url[..<start]) + "***" + String(url[at...])
    }

    /// The servers, each redacted, comma-separated.
    public static func redacted(_ urls: [String]) -> String {
        urls.map { redacted($0) }.joined(separator: ",")
    }
}
