/// Why an `HTTPServer` refused a request before its handler saw it; the raw value is the
/// `reason` label of the refusal metric. Each is answered (400 unless said otherwise) with
/// `Connection: close`, and the connection is closed after: a request whose framing is in
/// doubt leaves nothing on the connection that could be read as a next request.
public enum HTTPRequestRefusal: String, CaseIterable, Sendable {
    /// evhttp could not read the request line or a header (its own 400).
    case malformed
    /// The head was over `HTTPServerLimits.maxHeaderBytes` (evhttp's own 400).
    case headTooLarge = "head_too_large"
    /// The body was over `HTTPServerLimits.maxBodyBytes`, by Content-Length or as chunks
    /// arrived (evhttp's own 413).
    case bodyTooLarge = "body_too_large"
    /// An `Expect` other than `100-continue` (evhttp's own 417).
    case expectationFailed = "expectation_failed"
    /// More than one Content-Length field, or a list of values (RFC 9112 6.3, 5).
    case duplicateContentLength = "duplicate_content_length"
    /// A Content-Length that is not 1*DIGIT, such as `+33` (RFC 9112 6.3, 5).
    case invalidContentLength = "invalid_content_length"
    /// Transfer-Encoding with Content-Length, in an HTTP/1.0 request, repeated, or other
    /// than `chunked` alone: the only framing evhttp reads (RFC 9112 6.1, 6.3).
    case transferEncoding = "transfer_encoding"
    /// An HTTP/1.1 request without Host (RFC 9112 3.2).
    case missingHost = "missing_host"
    /// More than one Host field (RFC 9112 3.2).
    case duplicateHost = "duplicate_host"
    /// More than one Authorization field: which one counts would be a guess.
    case duplicateAuthorization = "duplicate_authorization"
    /// A header line continued on the next (obs-fold, RFC 9112 5.2), which the server refuses
    /// rather than joins.
    case obsFold = "obs_fold"
    /// Whitespace between a field name and its colon, or a name that is not a token
    /// (RFC 9112 5.1).
    case invalidFieldName = "invalid_field_name"
    /// A body announced on a method evhttp reads no body for (HEAD, TRACE, one it does not
    /// know): it would read the body as the next request.
    case unreadBody = "unread_body"

    /// The status it is answered with.
    public var status: Int {
        switch self {
        case .bodyTooLarge: 413
        case .expectationFailed: 417
        default: 400
        }
    }

    /// One sentence for the client, in the refusal's body.
    public var detail: String {
        switch self {
        case .malformed: "not an HTTP/1.x request this server can read"
        case .headTooLarge: "the request head is over the size limit"
        case .bodyTooLarge: "the request body is over the size limit"
        case .expectationFailed: "the only expectation served is 100-continue"
        case .duplicateContentLength: "more than one Content-Length"
        case .invalidContentLength: "Content-Length must be decimal digits only"
        case .transferEncoding: "Transfer-Encoding must be chunked alone, on HTTP/1.1, without Content-Length"
        case .missingHost: "an HTTP/1.1 request needs a Host header"
        case .duplicateHost: "more than one Host header"
        case .duplicateAuthorization: "more than one Authorization header"
        case .obsFold: "a header line continued on the next (obs-fold) is not accepted"
        case .invalidFieldName: "a header name must be a token directly followed by its colon"
        case .unreadBody: "this method takes no body"
        }
    }
}

/// A request head as the client sent it, read from the raw bytes (no I/O): the request
/// line and the header fields in order, names as sent: what `HTTPServer` shows its owner
/// for an `Expect: 100-continue` before the body is read (`HTTPContinueRequest`). `check`
/// holds the rules of RFC 9112 that evhttp does not, for every request.
public struct HTTPRequestHead: Sendable {
    public var method: String
    /// The request target as sent.
    public var target: String
    /// "HTTP/1.1".
    public var version: String
    public var headers: [(name: String, value: String)]

    /// Whether the version is 1.1 or later (the Host rule and `100 Continue` apply).
    public var isHTTP11OrLater: Bool { version != "HTTP/1.0" }

    /// The target's path, as `HTTPServerRequest.path` gives it: the query cut off, an
    /// absolute-form target's scheme and authority dropped, nothing decoded.
    public var path: String {
        var text = Substring(target)
        for scheme in ["http://", "https://"] where text.lowercased().hasPrefix(scheme) {
            text = text.dropFirst(scheme.count)
            text = text.firstIndex(of: "/").map { text[$0...] } ?? "/"
        }
        if let query = text.firstIndex(of: "?") { text = text[..<query] }
        return String(text)
    }

    /// Every value of the fields called `name` (case-insensitive), in order.
    public func values(_ name: String) -> [String] {
        let wanted = name.lowercased()
        return headers.filter { $0.name.lowercased() == wanted }.map(\.value)
    }

    /// The first value of `name`.
    public func header(_ name: String) -> String? { values(name).first }

    /// Reads `bytes`, which hold a whole head (its blank line included, leading blank lines
    /// allowed). Lines end in CRLF or a bare LF, as evhttp reads them. nil for what is not
    /// a request line and fields (evhttp refuses that itself) or breaks a rule (`check`).
    public static func parse(_ bytes: ArraySlice<UInt8>) -> HTTPRequestHead? {
        guard case .passes = check(bytes) else { return nil }
        var head: HTTPRequestHead?
        forEachLine(bytes) { line in
            guard var parsed = head else {
                let parts = line.split(separator: 32, omittingEmptySubsequences: true)
                head = HTTPRequestHead(method: text(parts[0]), target: text(parts[1]), version: text(parts[2]), headers: [])
                return true
            }
            let colon = line.firstIndex(of: 58) ?? line.endIndex
            parsed.headers.append((text(line[..<colon]), text(trimmed(line[line.index(after: colon)...]))))
            head = parsed
            return true
        }
        return head
    }

    /// What `check` found.
    public enum Check: Equatable, Sendable {
        case passes
        case refused(HTTPRequestRefusal)
        /// Not a request line and fields at all.
        case unreadable
    }

    /// The first RFC 9112 rule the head in `bytes` breaks that evhttp lets through. Run on
    /// every request, so it reads the bytes in place, comparing only the names it needs.
    public static func check(_ bytes: ArraySlice<UInt8>) -> Check {
        var method: ArraySlice<UInt8>?
        var isHTTP11 = false
        var lengths = 0, codings = 0, hosts = 0, authorizations = 0
        var lengthValue: ArraySlice<UInt8> = []
        var codingValue: ArraySlice<UInt8> = []
        var found: Check = .passes
        forEachLine(bytes) { line in
            guard method != nil else {
                let parts = line.split(separator: 32, omittingEmptySubsequences: true)
                guard parts.count == 3 else { found = .unreadable; return false }
                method = parts[0]
                isHTTP11 = !parts[2].elementsEqual(http10)
                return true
            }
            if line.first == 32 || line.first == 9 { found = .refused(.obsFold); return false }
            guard let colon = line.firstIndex(of: 58) else { found = .refused(.invalidFieldName); return false }
            let name = line[..<colon]
            guard !name.isEmpty, name.allSatisfy(isTokenByte) else { found = .refused(.invalidFieldName); return false }
            if named(name, contentLength) {
                lengths += 1
                lengthValue = trimmed(line[line.index(after: colon)...])
            } else if named(name, transferEncoding) {
                codings += 1
                codingValue = trimmed(line[line.index(after: colon)...])
            } else if named(name, host) {
                hosts += 1
            } else if named(name, authorization) {
                authorizations += 1
            }
            return true
        }
        guard case .passes = found else { return found }
        guard let method else { return .unreadable }
        if lengths > 1 || lengthValue.contains(44) { return .refused(.duplicateContentLength) }
        if lengths == 1, lengthValue.isEmpty || !lengthValue.allSatisfy({ (48...57).contains($0) }) { return .refused(.invalidContentLength) }
        if codings > 0, codings > 1 || lengths > 0 || !isHTTP11 || !named(codingValue, chunked) { return .refused(.transferEncoding) }
        if codings > 0 || (lengths == 1 && !lengthValue.allSatisfy { $0 == 48 }) {
            if !methodsWithBody.contains(where: { method.elementsEqual($0) }) { return .refused(.unreadBody) }
        }
        if hosts > 1 { return .refused(.duplicateHost) }
        if hosts == 0 && isHTTP11 { return .refused(.missingHost) }
        if authorizations > 1 { return .refused(.duplicateAuthorization) }
        return .passes
    }

    /// Calls `body` with each line of the head (ends cut off, leading blank lines skipped)
    /// until the blank line or until `body` returns false.
    private static func forEachLine(_ bytes: ArraySlice<UInt8>, _ body: (ArraySlice<UInt8>) -> Bool) {
        var start = bytes.startIndex
        var sawLine = false
        while start < bytes.endIndex, let end = bytes[start...].firstIndex(of: 10) {
            var line = bytes[start..<end]
            if line.last == 13 { line = line.dropLast() }
            start = end + 1
            if line.isEmpty {
                if sawLine { return }
                continue
            }
            sawLine = true
            guard body(line) else { return }
        }
    }

    private static func trimmed(_ value: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var value = value
        while let first = value.first, first == 32 || first == 9 { value = value.dropFirst() }
        while let last = value.last, last == 32 || last == 9 { value = value.dropLast() }
        return value
    }

    /// Whether `name` is `lowercase`, compared ASCII case-insensitively.
    private static func named(_ name: ArraySlice<UInt8>, _ lowercase: [UInt8]) -> Bool {
        name.count == lowercase.count && zip(name, lowercase).allSatisfy { ($0 | 0x20) == $1 }
    }

    private static let contentLength = Array("content-length".utf8)
    private static let transferEncoding = Array("transfer-encoding".utf8)
    private static let host = Array("host".utf8)
    private static let authorization = Array("authorization".utf8)
    private static let chunked = Array("chunked".utf8)
    private static let http10 = Array("HTTP/1.0".utf8)

    /// The methods whose body evhttp 2.1 reads; for any other it takes what follows the
    /// head for the next request.
    static let methodsWithBody = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT"].map { Array($0.utf8) }

    private static func text(_ bytes: ArraySlice<UInt8>) -> String { String(decoding: bytes, as: UTF8.self) }

    /// RFC 9110 5.6.2 tchar.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 48...57, 65...90, 97...122: true
        case 33, 35, 36, 37, 38, 39, 42, 43, 45, 46, 94, 95, 96, 124, 126: true
        default: false
        }
    }
}

/// The bytes of one connection since its last request ended, kept until they hold a whole
/// head: evhttp consumes a head line by line, so by the time it has read one the bytes are
/// gone from its buffer. Bounded by the head limit (evhttp refuses a longer head itself).
struct HTTPHeadRecorder {
    let limit: Int
    private(set) var bytes: [UInt8] = []
    /// Where the head ends (past its blank line), once seen.
    private(set) var headEnd: Int?
    private(set) var overflowed = false
    private var scanned = 0
    private var lineStart = 0
    private var sawLine = false

    init(limit: Int) {
        self.limit = max(0, limit)
    }

    /// Whether more bytes are wanted.
    var isOpen: Bool { headEnd == nil && !overflowed }

    /// How many more bytes are wanted: up to one past the limit, to tell an overflow.
    var room: Int { isOpen ? max(0, limit + 1 - bytes.count) : 0 }

    /// A request ended: what follows it (already read) starts the next head.
    mutating func restart(with following: [UInt8]) {
        bytes = []
        headEnd = nil
        overflowed = false
        scanned = 0
        lineStart = 0
        sawLine = false
        append(following)
    }

    mutating func append<Bytes: Collection<UInt8>>(_ more: Bytes) {
        guard isOpen else { return }
        bytes.append(contentsOf: more.prefix(room))
        while headEnd == nil, let end = bytes[scanned...].firstIndex(of: 10) {
            let length = end - lineStart - (end > lineStart && bytes[end - 1] == 13 ? 1 : 0)
            if length > 0 {
                sawLine = true
            } else if sawLine {
                headEnd = end + 1
            }
            lineStart = end + 1
            scanned = end + 1
        }
        if headEnd == nil { scanned = bytes.count }
        if headEnd == nil && bytes.count > limit { overflowed = true }
    }

    /// The head, once whole.
    var head: ArraySlice<UInt8>? { headEnd.map { bytes[..<$0] } }
}
