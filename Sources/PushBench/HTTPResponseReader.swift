/// Reads the store's HTTP/1.1 responses off a keep-alive connection: the status line,
/// the headers up to the blank line, then a `Content-Length` body. A response may arrive
/// split over several reads, and several may arrive in one. Only what the bench needs is
/// kept: 201 or not, and for a problem document its `code`.
///
/// Append each read's bytes, then take the whole responses with `next()` until it
/// returns nil. A response the reader cannot delimit (a bad status line, no length, a
/// chunked body) throws: the connection's framing is lost, so the run cannot go on on it.
struct HTTPResponseReader {
    enum Outcome: Equatable {
        /// `201 Created`: the payload and its push are committed.
        case created
        /// Any other final status: `"422 BAD_REQUEST"`, the status and the problem's `code`
        /// (just the status when the body has no code).
        case failed(String)
    }

    struct Malformed: Error, Equatable, CustomStringConvertible {
        let reason: String
        var description: String { reason }
    }

    /// A head longer than this is not the store's.
    static let maxHeadBytes = 16 * 1024
    /// Nor is a body longer than this (problem documents and 201 bodies are small).
    static let maxBodyBytes = 1 << 20

    private var buffer: [UInt8] = []
    /// Bytes of `buffer` already handed out as responses.
    private var consumed = 0
    /// Where the search for the end of the current head resumes.
    private var scanned = 0

    /// Bytes held for a response not yet whole.
    var pendingBytes: Int { buffer.count - consumed }

    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if consumed > 0, consumed == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            scanned = 0
            consumed = 0
        }
        buffer.append(contentsOf: bytes)
    }

    mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// The next whole final response, or nil until more bytes arrive. Informational
    /// (1xx) responses are skipped.
    mutating func next() throws(Malformed) -> Outcome? {
        while true {
            guard let headEnd = findHeadEnd() else {
                if buffer.count - consumed > HTTPResponseReader.maxHeadBytes {
                    throw Malformed(reason: "a response head over \(HTTPResponseReader.maxHeadBytes) bytes")
                }
                compact()
                return nil
            }
            let head = try Head.parse(buffer[consumed..<headEnd])
            let bodyStart = headEnd + 4
            let bodyLength: Int
            if (100..<200).contains(head.status) || head.status == 204 || head.status == 304 {
                bodyLength = 0
            } else if head.chunked {
                throw Malformed(reason: "a chunked response (\(head.status)): the bench reads Content-Length bodies only")
            } else if let length = head.contentLength {
                bodyLength = length
            } else {
                throw Malformed(reason: "a \(head.status) response without Content-Length")
            }
            guard buffer.count - bodyStart >= bodyLength else { return nil }
            let body = buffer[bodyStart..<(bodyStart + bodyLength)]
            consumed = bodyStart + bodyLength
            scanned = consumed
            if head.status < 200 { continue }
            if head.status == 201 { return .created }
            if let code = HTTPResponseReader.problemCode(in: body) { return .failed("\(head.status) \(code)") }
            return .failed("\(head.status)")
        }
    }

    /// The offset of the `\r\n\r\n` that ends the head starting at `consumed`.
    private mutating func findHeadEnd() -> Int? {
        let count = buffer.count
        var index = max(scanned, consumed)
        while index + 3 < count {
            if buffer[index] == 13, buffer[index + 1] == 10, buffer[index + 2] == 13, buffer[index + 3] == 10 { return index }
            index += 1
        }
        scanned = max(consumed, count - 3)
        return nil
    }

    /// Drops the responses handed out, keeping the partial one.
    private mutating func compact() {
        guard consumed > 0 else { return }
        buffer.removeSubrange(0..<consumed)
        scanned -= consumed
        consumed = 0
    }

    /// The string value of the top-level `"code"` member of a problem document, if any.
    /// A plain scan, enough for the store's own documents (the code is an ASCII name).
    static func problemCode(in body: ArraySlice<UInt8>) -> String? {
        let key = Array("\"code\"".utf8)
        var index = body.startIndex
        while index + key.count <= body.endIndex {
            if body[index] == key[0], body[index..<(index + key.count)].elementsEqual(key) {
                var cursor = index + key.count
                while cursor < body.endIndex, body[cursor] == 32 || body[cursor] == 9 { cursor += 1 }
                guard cursor < body.endIndex, body[cursor] == UInt8(ascii: ":") else { return nil }
                cursor += 1
                while cursor < body.endIndex, body[cursor] == 32 || body[cursor] == 9 { cursor += 1 }
                guard cursor < body.endIndex, body[cursor] == UInt8(ascii: "\"") else { return nil }
                let start = cursor + 1
                guard let end = body[start...].firstIndex(of: UInt8(ascii: "\"")), end - start <= 64 else { return nil }
                return String(decoding: body[start..<end], as: UTF8.self)
            }
            index += 1
        }
        return nil
    }

    /// What the bench reads from a response head.
    struct Head {
        var status: Int
        var contentLength: Int?
        var chunked = false

        static func parse(_ head: ArraySlice<UInt8>) throws(Malformed) -> Head {
            var lines = head.split(separator: 10, omittingEmptySubsequences: false).makeIterator()
            guard let first = lines.next() else { throw Malformed(reason: "an empty response head") }
            let statusLine = first.last == 13 ? first.dropLast() : first
            // HTTP/1.x SSS [reason]
            let prefix = Array("HTTP/1.".utf8)
            guard statusLine.count >= 12, statusLine.prefix(prefix.count).elementsEqual(prefix),
                  statusLine[statusLine.startIndex + 8] == 32,
                  let status = digits(statusLine[(statusLine.startIndex + 9)..<(statusLine.startIndex + 12)]),
                  statusLine.count == 12 || statusLine[statusLine.startIndex + 12] == 32 else {
                throw Malformed(reason: "a bad status line: \(printable(statusLine))")
            }
            var parsed = Head(status: status)
            while let raw = lines.next() {
                let line = raw.last == 13 ? raw.dropLast() : raw
                guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else {
                    throw Malformed(reason: "a bad header line: \(printable(line))")
                }
                let name = line[line.startIndex..<colon]
                let value = trim(line[(colon + 1)...])
                if equalsIgnoringCase(name, "content-length") {
                    guard value.count <= 9, let length = digits(value), length <= HTTPResponseReader.maxBodyBytes else {
                        throw Malformed(reason: "a bad Content-Length: \(printable(value))")
                    }
                    if let earlier = parsed.contentLength, earlier != length {
                        throw Malformed(reason: "two different Content-Length headers")
                    }
                    parsed.contentLength = length
                } else if equalsIgnoringCase(name, "transfer-encoding") {
                    parsed.chunked = true  // any coding but identity ends in chunked on a response
                }
            }
            return parsed
        }

        private static func digits(_ bytes: ArraySlice<UInt8>) -> Int? {
            guard !bytes.isEmpty else { return nil }
            var value = 0
            for byte in bytes {
                guard (48...57).contains(byte) else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            return value
        }

        private static func trim(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
            var slice = bytes
            while let first = slice.first, first == 32 || first == 9 { slice = slice.dropFirst() }
            while let last = slice.last, last == 32 || last == 9 { slice = slice.dropLast() }
            return slice
        }

        private static func equalsIgnoringCase(_ bytes: ArraySlice<UInt8>, _ lowercase: StaticString) -> Bool {
            guard bytes.count == lowercase.utf8CodeUnitCount else { return false }
            return lowercase.withUTF8Buffer { expected in
                zip(bytes, expected).allSatisfy { (65...90).contains($0) ? $0 + 32 == $1 : $0 == $1 }
            }
        }

        private static func printable(_ bytes: ArraySlice<UInt8>) -> String {
            String(decoding: bytes.prefix(80).map { (32...126).contains($0) ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
        }
    }
}
