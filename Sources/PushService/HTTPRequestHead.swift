/// The parts of an HTTP/1.x request head an endpoint for GET needs, parsed from bytes.
/// No I/O: `HTTPEndpoint` feeds it what it read.
struct HTTPRequestHead: Equatable {
    var method: String
    /// The request target's path, without its query.
    var path: String

    enum Failure: Error, Equatable {
        /// Not an HTTP/1.x request head.
        case malformed
    }

    /// Where the head in `bytes` ends (just past its empty line), if it has; `start`
    /// skips what an earlier search has seen. Lines may end in CRLF or, leniently, LF.
    static func end(in bytes: [UInt8], searchingFrom start: Int) -> Int? {
        var index = max(start, 1)
        while index < bytes.count {
            // An empty line: LF, then (CR) LF.
            if bytes[index] == lf,
               bytes[index - 1] == lf || (index >= 2 && bytes[index - 1] == cr && bytes[index - 2] == lf) {
                return index + 1
            }
            index += 1
        }
        return nil
    }

    /// Parses a whole head (request line, header lines, empty line).
    static func parse(_ head: ArraySlice<UInt8>) throws(Failure) -> HTTPRequestHead {
        var lines = head.split(separator: lf, omittingEmptySubsequences: false).map { line in
            line.last == cr ? line.dropLast() : line
        }
        while lines.last?.isEmpty == true { lines.removeLast() }
        guard let requestLine = lines.first else { throw .malformed }
        let parts = requestLine.split(separator: space, omittingEmptySubsequences: false)
        guard parts.count == 3,
              !parts[0].isEmpty, parts[0].allSatisfy(isTokenByte),
              parts[1].first == slash, parts[1].allSatisfy({ $0 > space && $0 < 0x7F }),
              parts[2].elementsEqual("HTTP/1.1".utf8) || parts[2].elementsEqual("HTTP/1.0".utf8)
        else { throw .malformed }
        for line in lines.dropFirst() {
            // name ":" value, the name a token (no space before the colon).
            guard let colon = line.firstIndex(of: colon), colon > line.startIndex,
                  line[line.startIndex..<colon].allSatisfy(isTokenByte)
            else { throw .malformed }
        }
        let target = parts[1]
        let path = target.firstIndex(of: question).map { target[target.startIndex..<$0] } ?? target
        return HTTPRequestHead(method: String(decoding: parts[0], as: UTF8.self), path: String(decoding: path, as: UTF8.self))
    }

    private static let cr = UInt8(ascii: "\r")
    private static let lf = UInt8(ascii: "\n")
    private static let space = UInt8(ascii: " ")
    private static let slash = UInt8(ascii: "/")
    private static let colon = UInt8(ascii: ":")
    private static let question = UInt8(ascii: "?")

    /// RFC 9110 token characters.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default:
            tokenPunctuation.contains(byte)
        }
    }

    private static let tokenPunctuation = Set("!#$%&'*+-.^_`|~".utf8)
}

/// A whole HTTP/1.1 response that closes the connection after it.
struct HTTPResponse {
    var status: Int
    var contentType: String
    var body: [UInt8]
    var extraHeaders: [(String, String)] = []

    func encoded() -> [UInt8] {
        var head = "HTTP/1.1 \(status) \(HTTPResponse.reason(status))\r\n"
        head += "Content-Type: \(contentType)\r\nContent-Length: \(body.count)\r\nConnection: close\r\n"
        for (name, value) in extraHeaders { head += "\(name): \(value)\r\n" }
        head += "\r\n"
        return Array(head.utf8) + body
    }

    static func plain(_ status: Int, _ text: String, extraHeaders: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, contentType: "text/plain; charset=utf-8", body: Array((text + "\n").utf8),
                     extraHeaders: extraHeaders)
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 204: "No Content"
        case 400: "Bad Request"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 503: "Service Unavailable"
        default: "Status"
        }
    }
}
