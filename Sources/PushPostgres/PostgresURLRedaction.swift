/// Masks the password in a connection string, following the two syntaxes as libpq scans
/// them (fe-connect.c): a URL's user info ends at the first `@` or `/` after the scheme,
/// and its password is what follows the first `:` there; query parameters are `&`-separated
/// `key=value`; the `key=value` form separates pairs by white space, with single quotes
/// and backslash escapes in values.
enum PostgresURLRedaction {
    static let mask = "****"

    static func redact(_ conninfo: String) -> String {
        let bytes = Array(conninfo.utf8)
        var ranges: [Range<Int>] = []
        if let schemeEnd = uriSchemeEnd(bytes) {
            ranges = uriPasswordRanges(bytes, from: schemeEnd)
        } else {
            ranges = keyValuePasswordRanges(bytes)
        }
        guard !ranges.isEmpty else { return conninfo }
        var out: [UInt8] = []
        var position = 0
        for range in ranges {
            out += bytes[position..<range.lowerBound]
            out += Array(mask.utf8)
            position = range.upperBound
        }
        out += bytes[position...]
        return String(decoding: out, as: UTF8.self)
    }

    private static func uriSchemeEnd(_ bytes: [UInt8]) -> Int? {
        for scheme in ["postgresql://", "postgres://"] {
            let prefix = Array(scheme.utf8)
            if bytes.starts(with: prefix) { return prefix.count }
        }
        return nil
    }

    private static func uriPasswordRanges(_ bytes: [UInt8], from start: Int) -> [Range<Int>] {
        var ranges: [Range<Int>] = []
        var position = start
        while position < bytes.count, bytes[position] != UInt8(ascii: "@"), bytes[position] != UInt8(ascii: "/") {
            position += 1
        }
        if position < bytes.count, bytes[position] == UInt8(ascii: "@"),
           let colon = bytes[start..<position].firstIndex(of: UInt8(ascii: ":")), colon + 1 < position {
            ranges.append((colon + 1)..<position)
        }
        // Query parameters: password=... anywhere after the first '?'.
        guard let question = bytes[position...].firstIndex(of: UInt8(ascii: "?")) else { return ranges }
        var pairStart = question + 1
        while pairStart <= bytes.count {
            let pairEnd = bytes[pairStart...].firstIndex(of: UInt8(ascii: "&")) ?? bytes.count
            let pair = bytes[pairStart..<pairEnd]
            if let equals = pair.firstIndex(of: UInt8(ascii: "=")),
               String(decoding: bytes[pairStart..<equals], as: UTF8.self) == "password", equals + 1 < pairEnd {
                ranges.append((equals + 1)..<pairEnd)
            }
            pairStart = pairEnd + 1
        }
        return ranges
    }

    private static func keyValuePasswordRanges(_ bytes: [UInt8]) -> [Range<Int>] {
        var ranges: [Range<Int>] = []
        var position = 0
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || (0x09...0x0D).contains(byte) }
        func skipSpace() { while position < bytes.count, isSpace(bytes[position]) { position += 1 } }
        while true {
            skipSpace()
            guard position < bytes.count else { return ranges }
            let keyStart = position
            while position < bytes.count, bytes[position] != UInt8(ascii: "="), !isSpace(bytes[position]) { position += 1 }
            let key = String(decoding: bytes[keyStart..<position], as: UTF8.self)
            skipSpace()
            // Not key=value: libpq rejects it without quoting any value, so stop here.
            guard position < bytes.count, bytes[position] == UInt8(ascii: "=") else { return ranges }
            position += 1
            skipSpace()
            let valueStart: Int
            let valueEnd: Int
            if position < bytes.count, bytes[position] == UInt8(ascii: "'") {
                position += 1
                valueStart = position
                while position < bytes.count, bytes[position] != UInt8(ascii: "'") {
                    position += bytes[position] == UInt8(ascii: "\\") ? 2 : 1
                }
                valueEnd = min(position, bytes.count)
                position += 1
            } else {
                valueStart = position
                while position < bytes.count, !isSpace(bytes[position]) {
                    position += bytes[position] == UInt8(ascii: "\\") ? 2 : 1
                }
                valueEnd = min(position, bytes.count)
            }
            if key == "password", valueStart < valueEnd { ranges.append(valueStart..<valueEnd) }
        }
    }
}
