/// One golden frame from protocol/vectors (SPEC.md section 9), parsed from its text.
/// The codec tests and the conformance suite both read the same files through this.
public struct TestVector: Sendable, Equatable {
    public enum Expectation: Sendable, Equatable {
        /// A whole message, with its fields as they stand on the wire (name, value bytes).
        case message(type: MessageType, correlation: UInt32, status: Status, fields: [(String, [UInt8])])
        /// The decoder needs more bytes and reports nothing yet.
        case incomplete
        /// A framing fault found from the header: GOAWAY with this status, then close.
        case fatal(Status)
        /// A request, or a frame of unknown type, that is delimited but refused: the
        /// receiver answers ERROR with this status ([9-6]).
        case requestError(Status)
        /// A reply or one-way message that is delimited but refused: never answered; a
        /// reply fails its request with this status, a MISSED is dropped, a GOAWAY still
        /// ends the connection ([9-7], [5.6-3]).
        case rejected(Status)

        public static func == (lhs: Expectation, rhs: Expectation) -> Bool {
            switch (lhs, rhs) {
            case let (.message(t1, c1, s1, f1), .message(t2, c2, s2, f2)):
                t1 == t2 && c1 == c2 && s1 == s2 && f1.map(\.0) == f2.map(\.0) && f1.map(\.1) == f2.map(\.1)
            case (.incomplete, .incomplete): true
            case let (.fatal(a), .fatal(b)), let (.requestError(a), .requestError(b)), let (.rejected(a), .rejected(b)): a == b
            default: false
            }
        }
    }

    public var name: String
    public var clauses: [String]
    public var maxFrame: Int
    public var bytes: [UInt8]
    public var expectation: Expectation

    public struct ParseError: Error, CustomStringConvertible {
        public var line: Int
        public var reason: String
        public var description: String { "line \(line): \(reason)" }
    }

    /// Parses every vector in one .vec file's text.
    public static func parseFile(_ text: String) throws -> [TestVector] {
        var vectors: [TestVector] = []
        var current: TestVector?
        var fields: [(String, [UInt8])] = []
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let lineNumber = index + 1
            func fail(_ reason: String) -> ParseError { ParseError(line: lineNumber, reason: reason) }
            let line = rawLine.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init)?
                .trimmingWhitespace() ?? ""
            if line.isEmpty { continue }
            let words = line.split(separator: " ").map(String.init)
            let keyword = words[0]
            if keyword == "vector" {
                guard current == nil, words.count == 2 else { throw fail("misplaced vector line") }
                current = TestVector(name: words[1], clauses: [], maxFrame: FrameLimits.defaultMaxFrame, bytes: [], expectation: .incomplete)
                fields = []
                continue
            }
            guard var vector = current else { throw fail("'\(keyword)' outside a vector") }
            switch keyword {
            case "clause":
                vector.clauses.append(contentsOf: words.dropFirst())
            case "max_frame":
                guard words.count == 2, let value = Int(words[1]) else { throw fail("bad max_frame") }
                vector.maxFrame = value
            case "hex":
                guard let bytes = [UInt8](hex: words.dropFirst().joined()) else { throw fail("bad hex") }
                vector.bytes.append(contentsOf: bytes)
            case "expect":
                vector.expectation = try parseExpectation(Array(words.dropFirst()), fail: fail)
            case "field":
                guard words.count == 3 else { throw fail("field wants NAME HEX") }
                guard let value = words[2] == "-" ? [] : [UInt8](hex: words[2]) else { throw fail("bad field hex") }
                fields.append((words[1], value))
            case "end":
                if case .message(let type, let correlation, let status, _) = vector.expectation {
                    vector.expectation = .message(type: type, correlation: correlation, status: status, fields: fields)
                }
                vectors.append(vector)
                current = nil
                continue
            default:
                throw fail("unknown keyword '\(keyword)'")
            }
            current = vector
        }
        if current != nil { throw ParseError(line: 0, reason: "last vector has no 'end'") }
        return vectors
    }

    private static func parseExpectation(_ words: [String], fail: (String) -> ParseError) throws -> Expectation {
        guard let kind = words.first else { throw fail("empty expect") }
        func status(_ name: String) throws -> Status {
            guard let status = Status(name: name) else { throw fail("unknown status \(name)") }
            return status
        }
        switch kind {
        case "incomplete":
            return .incomplete
        case "fatal" where words.count == 2:
            return .fatal(try status(words[1]))
        case "request_error" where words.count == 2:
            return .requestError(try status(words[1]))
        case "rejected" where words.count == 2:
            return .rejected(try status(words[1]))
        case "message" where words.count >= 2:
            guard let type = MessageType(specName: words[1]) else { throw fail("unknown type \(words[1])") }
            var correlation: UInt32 = 0
            var headerStatus = Status.ok
            for pair in words.dropFirst(2) {
                let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
                guard parts.count == 2 else { throw fail("bad attribute \(pair)") }
                switch parts[0] {
                case "correlation":
                    guard let value = UInt32(parts[1]) else { throw fail("bad correlation") }
                    correlation = value
                case "status":
                    headerStatus = try status(parts[1])
                default:
                    throw fail("unknown attribute \(parts[0])")
                }
            }
            return .message(type: type, correlation: correlation, status: headerStatus, fields: [])
        default:
            throw fail("bad expect line")
        }
    }
}

extension Array where Element == UInt8 {
    /// Bytes from hex digits (whitespace already removed); nil on odd length or a non-hex digit.
    public init?(hex: String) {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        self = bytes
    }

    public var hexString: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(count * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension String {
    func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
              let last = scalars.lastIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        return String(scalars[first...last])
    }
}

/// What decoding a byte stream produced, in the terms the vector files use.
public enum DecodeOutcome: Equatable, Sendable {
    case messages([Message])
    case incomplete
    case fatal(Status)
    case requestError(Status)
    case rejected(Status)
}

extension TestVector {
    /// Feeds `chunks` to a fresh decoder and reports what the vector's expectation speaks of.
    public static func decode(chunks: [[UInt8]], maxFrame: Int) -> DecodeOutcome {
        var decoder = FrameDecoder(maxFrame: maxFrame)
        var messages: [Message] = []
        do {
            for chunk in chunks {
                decoder.feed(chunk)
                while let frame = try decoder.next() {
                    do {
                        messages.append(try Message.decode(frame))
                    } catch {
                        if let type = frame.header.type, !type.isRequest { return .rejected(error.status) }
                        return .requestError(error.status)
                    }
                }
            }
        } catch {
            return .fatal(error.status)
        }
        if decoder.bufferedByteCount > 0 || messages.isEmpty { return .incomplete }
        return .messages(messages)
    }
}
