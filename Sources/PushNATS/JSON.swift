/// Just enough JSON for JetStream's API: a strict reader (RFC 8259, no trailing commas,
/// no comments, bounded depth) into `JSONValue`, and string quoting for the requests we
/// write by hand. No Foundation.
enum JSONValue: Equatable {
    case null
    case bool(Bool)
    /// The number's text, so a 64-bit sequence is read exactly (not through Double).
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.number(let a), .number(let b)): a == b
        case (.string(let a), .string(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)): a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: false
        }
    }

    subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.0 == key }?.1
    }

    var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    var intValue: Int? {
        if case .number(let text) = self { return Int(text) }
        return nil
    }

    var uint64Value: UInt64? {
        if case .number(let text) = self { return UInt64(text) }
        return nil
    }

    static func parse(_ bytes: [UInt8]) throws(NATSError) -> JSONValue {
        var reader = JSONReader(bytes: bytes)
        let value = try reader.value(depth: 0)
        reader.skipSpace()
        guard reader.atEnd else { throw reader.failure("trailing bytes") }
        return value
    }

    /// `text` as a JSON string literal, quotes included.
    static func quote(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}

private struct JSONReader {
    let bytes: [UInt8]
    var index = 0
    static let maximumDepth = 64

    init(bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool { index == bytes.count }

    func failure(_ what: String) -> NATSError {
        .malformedReply("JSON: \(what) at byte \(index)")
    }

    mutating func skipSpace() {
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
    }

    mutating func value(depth: Int) throws(NATSError) -> JSONValue {
        guard depth < JSONReader.maximumDepth else { throw failure("nesting too deep") }
        skipSpace()
        guard index < bytes.count else { throw failure("unexpected end") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try object(depth: depth)
        case UInt8(ascii: "["): return try array(depth: depth)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        default: return .number(try number())
        }
    }

    private mutating func literal(_ word: String) throws(NATSError) {
        let expected = Array(word.utf8)
        guard bytes.count - index >= expected.count, Array(bytes[index..<index + expected.count]) == expected else {
            throw failure("unexpected token")
        }
        index += expected.count
    }

    private mutating func expect(_ byte: UInt8) throws(NATSError) {
        skipSpace()
        guard index < bytes.count, bytes[index] == byte else { throw failure("expected '\(Character(Unicode.Scalar(byte)))'") }
        index += 1
    }

    private mutating func peek(_ byte: UInt8) -> Bool {
        skipSpace()
        return index < bytes.count && bytes[index] == byte
    }

    private mutating func object(depth: Int) throws(NATSError) -> JSONValue {
        try expect(UInt8(ascii: "{"))
        var members: [(String, JSONValue)] = []
        if peek(UInt8(ascii: "}")) {
            index += 1
            return .object(members)
        }
        while true {
            skipSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw failure("expected a key") }
            let key = try string()
            try expect(UInt8(ascii: ":"))
            members.append((key, try value(depth: depth + 1)))
            if peek(UInt8(ascii: ",")) {
                index += 1
                continue
            }
            try expect(UInt8(ascii: "}"))
            return .object(members)
        }
    }

    private mutating func array(depth: Int) throws(NATSError) -> JSONValue {
        try expect(UInt8(ascii: "["))
        var elements: [JSONValue] = []
        if peek(UInt8(ascii: "]")) {
            index += 1
            return .array(elements)
        }
        while true {
            elements.append(try value(depth: depth + 1))
            if peek(UInt8(ascii: ",")) {
                index += 1
                continue
            }
            try expect(UInt8(ascii: "]"))
            return .array(elements)
        }
    }

    private mutating func number() throws(NATSError) -> String {
        let start = index
        func digits(_ reader: inout JSONReader) -> Int {
            let from = reader.index
            while reader.index < reader.bytes.count, (0x30...0x39).contains(reader.bytes[reader.index]) { reader.index += 1 }
            return reader.index - from
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
        let leading = index
        guard digits(&self) > 0 else { throw failure("bad number") }
        guard bytes[leading] != UInt8(ascii: "0") || index - leading == 1 else { throw failure("leading zero") }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard digits(&self) > 0 else { throw failure("bad fraction") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard digits(&self) > 0 else { throw failure("bad exponent") }
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    private mutating func string() throws(NATSError) -> String {
        index += 1  // the opening quote
        var run = index  // start of bytes copied verbatim
        var out = ""
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                out += try verbatim(run, index)
                index += 1
                return out
            }
            guard byte >= 0x20 else { throw failure("control character in a string") }
            if byte == UInt8(ascii: "\\") {
                out += try verbatim(run, index)
                index += 1
                guard index < bytes.count else { break }
                let escaped = bytes[index]
                index += 1
                switch escaped {
                case UInt8(ascii: "\""): out += "\""
                case UInt8(ascii: "\\"): out += "\\"
                case UInt8(ascii: "/"): out += "/"
                case UInt8(ascii: "b"): out += "\u{08}"
                case UInt8(ascii: "f"): out += "\u{0C}"
                case UInt8(ascii: "n"): out += "\n"
                case UInt8(ascii: "r"): out += "\r"
                case UInt8(ascii: "t"): out += "\t"
                case UInt8(ascii: "u"): out.unicodeScalars.append(try unicodeEscape())
                default: throw failure("bad escape")
                }
                run = index
                continue
            }
            index += 1
        }
        throw failure("unterminated string")
    }

    /// The bytes in `start..<end` as UTF-8, which must be valid.
    private func verbatim(_ start: Int, _ end: Int) throws(NATSError) -> String {
        guard start < end else { return "" }
        guard let text = String(validating: bytes[start..<end], as: UTF8.self) else { throw failure("invalid UTF-8") }
        return text
    }

    private mutating func hex4() throws(NATSError) -> UInt32 {
        guard bytes.count - index >= 4 else { throw failure("short \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case 0x30...0x39: digit = UInt32(byte - 0x30)
            case 0x41...0x46: digit = UInt32(byte - 0x41 + 10)
            case 0x61...0x66: digit = UInt32(byte - 0x61 + 10)
            default: throw failure("bad \\u escape")
            }
            value = value * 16 + digit
            index += 1
        }
        return value
    }

    private mutating func unicodeEscape() throws(NATSError) -> Unicode.Scalar {
        let first = try hex4()
        if (0xD800...0xDBFF).contains(first) {
            // A high surrogate must be followed by an escaped low one.
            guard bytes.count - index >= 2, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                throw failure("lone surrogate")
            }
            index += 2
            let second = try hex4()
            guard (0xDC00...0xDFFF).contains(second),
                  let scalar = Unicode.Scalar(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))
            else { throw failure("bad surrogate pair") }
            return scalar
        }
        guard let scalar = Unicode.Scalar(first) else { throw failure("lone surrogate") }
        return scalar
    }
}
