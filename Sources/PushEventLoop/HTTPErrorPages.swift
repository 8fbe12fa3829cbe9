/// What an `HTTPServer` answers in place of evhttp's built-in HTML error pages (400, 413,
/// 417) and in its own 503 at the connection cap: one content type, a body per status.
///
/// libevent 2.1 has no hook for those pages (`evhttp_set_errorcb` is 2.2's): evhttp
/// writes them to the connection's output buffer itself. The server watches that buffer,
/// and on the same loop pass, before anything reaches the socket, replaces a page evhttp
/// wrote (status 400 or more, `Content-Type: text/html`) by this one, status line kept.
public struct HTTPErrorPages: Sendable {
    public var contentType: String
    /// The body for `status`, given its reason phrase and, for a request the server refused
    /// (`HTTPRequestRefusal`), why in one sentence.
    public var body: @Sendable (_ status: Int, _ reason: String, _ detail: String?) -> [UInt8]

    public init(contentType: String, body: @escaping @Sendable (_ status: Int, _ reason: String, _ detail: String?) -> [UInt8]) {
        self.contentType = contentType
        self.body = body
    }

    /// The whole 503 sent to a connection over the cap.
    func busyResponse() -> [UInt8] {
        let body = body(503, "Service Unavailable", nil)
        let head = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: \(contentType)\r\nConnection: close\r\nRetry-After: 1\r\n"
            + "Content-Length: \(body.count)\r\n\r\n"
        return Array(head.utf8) + body
    }

    /// Whether `written` is evhttp's `100 Continue` (`HTTP/1.x 100 Continue`, no headers).
    static func isContinue(_ written: [UInt8]) -> Bool {
        written.count == 25 && written.starts(with: Array("HTTP/1.".utf8)) && written[8...].elementsEqual(Array(" 100 Continue\r\n\r\n".utf8))
    }

    /// The status of `written` when it is one of evhttp's own error pages (status 400 or
    /// more, `Content-Type: text/html`), else nil.
    static func evhttpPageStatus(_ written: [UInt8]) -> Int? {
        pageParts(written)?.status
    }

    private static func pageParts(_ written: [UInt8]) -> (status: Int, lineEnd: Int, headEnd: Int)? {
        let crlf: [UInt8] = [13, 10]
        guard let lineEnd = HTTPErrorPages.find(crlf, in: written, from: 0),
              let headEnd = HTTPErrorPages.find(crlf + crlf, in: written, from: lineEnd)
        else { return nil }
        let line = written[..<lineEnd]
        // "HTTP/1.x NNN Reason"
        guard line.count >= 12, line.starts(with: Array("HTTP/1.".utf8)), line[line.startIndex + 8] == 32,
              let status = Int(String(decoding: line[(line.startIndex + 9)..<(line.startIndex + 12)], as: UTF8.self)),
              status >= 400
        else { return nil }
        let head = String(decoding: written[lineEnd..<headEnd], as: UTF8.self).lowercased()
        guard head.contains("\r\ncontent-type: text/html") else { return nil }
        return (status, lineEnd, headEnd)
    }

    /// `written` with its headers and body replaced, when it is one of evhttp's own error
    /// pages; nil otherwise (a response of ours, a `100 Continue`, something cut short).
    func replacing(_ written: [UInt8]) -> [UInt8]? {
        guard let (status, lineEnd, headEnd) = HTTPErrorPages.pageParts(written) else { return nil }
        let line = written[..<lineEnd]
        let reason = String(decoding: line.dropFirst(13), as: UTF8.self)
        let body = body(status, reason, nil)
        let headers = "\r\nContent-Type: \(contentType)\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        // evhttp leaves the page's body out of an answer to HEAD.
        let hadBody = headEnd + 4 < written.count
        return Array(line) + Array(headers.utf8) + (hadBody ? body : [])
    }

    private static func find(_ needle: [UInt8], in bytes: [UInt8], from start: Int) -> Int? {
        guard bytes.count >= needle.count, start <= bytes.count - needle.count else { return nil }
        for index in start...(bytes.count - needle.count) where bytes[index..<(index + needle.count)].elementsEqual(needle) {
            return index
        }
        return nil
    }
}
