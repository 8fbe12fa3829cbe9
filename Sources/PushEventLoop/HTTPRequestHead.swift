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
/// line and the header fields in order, names as sent. What `HTTPServer` checks the rules
/// of RFC 9112 on that evhttp does not (`refusal`), and what it shows its owner for an
/// `Expect: 100-continue` before the body is read (`HTTPContinueRequest`).
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
    /// a request line and fields; evhttp refuses that itself.
    public static func parse(_ bytes: ArraySlice<UInt8>) -> (HTTPRequestHead?, HTTPRequestRefusal?) {
        var lines: [ArraySlice<UInt8>] = []
        var start = bytes.startIndex
        for index in bytes.indices where bytes[index] == 10 {
            var line = bytes[start..<index]
            if line.last == 13 { line = line.dropLast() }
            start = index + 1
            if line.isEmpty {
                if lines.isEmpty { continue }
                break
            }
            lines.append(line)
        }
        guard let requestLine = lines.first else { return (nil, nil) }
        let parts = requestLine.split(separator: 32, omittingEmptySubsequences: true)
        guard parts.count == 3 else { return (nil, nil) }
        var head = HTTPRequestHead(method: text(parts[0]), target: text(parts[1]), version: text(parts[2]), headers: [])
        for line in lines.dropFirst() {
            if line.first == 32 || line.first == 9 { return (head, .obsFold) }
            guard let colon = line.firstIndex(of: 58) else { return (head, .invalidFieldName) }
            let name = line[line.startIndex..<colon]
            guard !name.isEmpty, name.allSatisfy(isTokenByte) else { return (head, .invalidFieldName) }
            var value = line[(colon + 1)...]
            while let first = value.first, first == 32 || first == 9 { value = value.dropFirst() }
            while let last = value.last, last == 32 || last == 9 { value = value.dropLast() }
            head.headers.append((text(name), text(value)))
        }
        return (head, head.refusal)
    }

    /// The first RFC 9112 rule this head breaks that evhttp lets through, or nil.
    public var refusal: HTTPRequestRefusal? {
        let lengths = values("Content-Length")
        if lengths.count > 1 { return .duplicateContentLength }
        if let length = lengths.first {
            if length.contains(",") { return .duplicateContentLength }
            if length.isEmpty || !length.utf8.allSatisfy({ (48...57).contains($0) }) { return .invalidContentLength }
        }
        let codings = values("Transfer-Encoding")
        if !codings.isEmpty {
            guard codings.count == 1, lengths.isEmpty, isHTTP11OrLater, codings[0].lowercased() == "chunked" else {
                return .transferEncoding
            }
        }
        if !HTTPRequestHead.methodsWithBody.contains(method), !codings.isEmpty || lengths.contains(where: { $0 != "0" }) {
            return .unreadBody
        }
        let hosts = values("Host")
        if hosts.count > 1 { return .duplicateHost }
        if hosts.isEmpty && isHTTP11OrLater { return .missingHost }
        if values("Authorization").count > 1 { return .duplicateAuthorization }
        return nil
    }

    /// The methods whose body evhttp 2.1 reads; for any other it takes what follows the
    /// head for the next request.
    static let methodsWithBody: Set<String> = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT"]

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
        while scanned < bytes.count, headEnd == nil {
            if bytes[scanned] == 10 {
                let length = scanned - lineStart - (scanned > lineStart && bytes[scanned - 1] == 13 ? 1 : 0)
                if length > 0 {
                    sawLine = true
                } else if sawLine {
                    headEnd = scanned + 1
                }
                lineStart = scanned + 1
            }
            scanned += 1
        }
        if headEnd == nil && bytes.count > limit { overflowed = true }
    }

    /// The head, once whole.
    var head: ArraySlice<UInt8>? { headEnd.map { bytes[..<$0] } }
}
