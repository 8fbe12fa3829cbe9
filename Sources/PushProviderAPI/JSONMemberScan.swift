import FoundationEssentials

/// What JSONDecoder does not say about a JSON text: a member given twice in one object (it
/// keeps one of them silently) and numbers no Double holds (it calls the whole text "not
/// JSON"). A walk over the text's structure, not a parser: JSONDecoder decides whether the
/// text is JSON, and this walk stops at the first byte that cannot begin what it expects,
/// so what it reports counts only for a text JSONDecoder reads (`MessagePost.decode`).
struct JSONMemberScan {
    /// The first member given twice in one object, as a path ("push.device").
    private(set) var duplicate: String?
    /// Number tokens that are JSON but that no Double holds (beyond its range, or so small
    /// it rounds to 0), with the path of the member they are the value of.
    private(set) var unrepresentable: [(bytes: Range<Int>, path: String)] = []

    /// Deeper than this, the walk stops (JSONDecoder refuses far less deep texts than a
    /// stack overflow would need, and the API reads two levels).
    static let maxDepth = 64

    init(_ text: [UInt8]) {
        var walk = Walk(text: text)
        _ = walk.value(path: "", depth: 0)
        duplicate = walk.duplicate
        unrepresentable = walk.unrepresentable
    }

    /// `text` with each unrepresentable number replaced by `0`: JSON exactly when `text`
    /// is, since one number token stands for another.
    func withNumbersInRange(_ text: [UInt8]) -> [UInt8] {
        var patched: [UInt8] = []
        patched.reserveCapacity(text.count)
        var from = 0
        for number in unrepresentable {
            patched += text[from..<number.bytes.lowerBound]
            patched.append(UInt8(ascii: "0"))
            from = number.bytes.upperBound
        }
        patched += text[from...]
        return patched
    }

    private struct Walk {
        let text: [UInt8]
        var at = 0
        var duplicate: String?
        var unrepresentable: [(bytes: Range<Int>, path: String)] = []

        private var next: UInt8? { at < text.count ? text[at] : nil }

        private mutating func skipSpace() {
            while let byte = next, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { at += 1 }
        }

        /// Walks one value; false where the text stops being what JSON allows here.
        mutating func value(path: String, depth: Int) -> Bool {
            skipSpace()
            guard let byte = next, depth <= JSONMemberScan.maxDepth else { return false }
            switch byte {
            case UInt8(ascii: "{"): return object(path: path, depth: depth + 1)
            case UInt8(ascii: "["): return array(path: path, depth: depth + 1)
            case UInt8(ascii: "\""): return string() != nil
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return number(path: path)
            case UInt8(ascii: "t"): return literal("true")
            case UInt8(ascii: "f"): return literal("false")
            case UInt8(ascii: "n"): return literal("null")
            default: return false
            }
        }

        private mutating func object(path: String, depth: Int) -> Bool {
            at += 1
            skipSpace()
            if next == UInt8(ascii: "}") {
                at += 1
                return true
            }
            var names: Set<String> = []
            while true {
                skipSpace()
                guard let name = string() else { return false }
                let member = path.isEmpty ? name : path + "." + name
                if !names.insert(name).inserted, duplicate == nil { duplicate = member }
                skipSpace()
                guard next == UInt8(ascii: ":") else { return false }
                at += 1
                guard value(path: member, depth: depth) else { return false }
                skipSpace()
                switch next {
                case UInt8(ascii: ","): at += 1
                case UInt8(ascii: "}"):
                    at += 1
                    return true
                default: return false
                }
            }
        }

        private mutating func array(path: String, depth: Int) -> Bool {
            at += 1
            skipSpace()
            if next == UInt8(ascii: "]") {
                at += 1
                return true
            }
            var index = 0
            while true {
                guard value(path: "\(path)[\(index)]", depth: depth) else { return false }
                index += 1
                skipSpace()
                switch next {
                case UInt8(ascii: ","): at += 1
                case UInt8(ascii: "]"):
                    at += 1
                    return true
                default: return false
                }
            }
        }

        /// A string token's value: its bytes when it has no escapes, else as JSONDecoder
        /// reads the token (so `"\u0074ext"` is the member `text`, as the decoder sees it).
        private mutating func string() -> String? {
            guard next == UInt8(ascii: "\"") else { return nil }
            let start = at
            at += 1
            var escaped = false
            while let byte = next {
                switch byte {
                case UInt8(ascii: "\""):
                    at += 1
                    guard escaped else { return String(decoding: text[(start + 1)..<(at - 1)], as: UTF8.self) }
                    return try? JSONDecoder().decode(String.self, from: Data(text[start..<at]))
                case UInt8(ascii: "\\"):
                    escaped = true
                    at += 2
                case 0..<0x20: return nil
                default: at += 1
                }
            }
            return nil
        }

        /// A number token (RFC 8259's grammar), noted when no Double holds it.
        private mutating func number(path: String) -> Bool {
            let start = at
            var mantissaHasNonZero = false
            if next == UInt8(ascii: "-") { at += 1 }
            guard let first = next, isDigit(first) else { return false }
            if first == UInt8(ascii: "0") {
                at += 1
            } else {
                mantissaHasNonZero = digits()
            }
            if next == UInt8(ascii: ".") {
                at += 1
                guard let byte = next, isDigit(byte) else { return false }
                if digits() { mantissaHasNonZero = true }
            }
            if next == UInt8(ascii: "e") || next == UInt8(ascii: "E") {
                at += 1
                if next == UInt8(ascii: "+") || next == UInt8(ascii: "-") { at += 1 }
                guard let byte = next, isDigit(byte) else { return false }
                _ = digits()
            }
            let token = String(decoding: text[start..<at], as: UTF8.self)
            if let value = Double(token), value.isFinite, value != 0 || !mantissaHasNonZero { return true }
            unrepresentable.append((start..<at, path))
            return true
        }

        /// Skips digits; whether any was not 0.
        private mutating func digits() -> Bool {
            var nonZero = false
            while let byte = next, isDigit(byte) {
                if byte != UInt8(ascii: "0") { nonZero = true }
                at += 1
            }
            return nonZero
        }

        private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

        private mutating func literal(_ word: StaticString) -> Bool {
            let bytes = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
            guard text.count - at >= bytes.count, text[at..<(at + bytes.count)].elementsEqual(bytes) else { return false }
            at += bytes.count
            return true
        }
    }
}
