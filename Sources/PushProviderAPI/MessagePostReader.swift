/// The body of `POST /v1/messages` as nearly every client writes it, read in one pass over
/// its bytes: an object of the known members, each once, strings (escapes included),
/// integers written as digits, booleans and nulls, and `push` as an object of the same
/// kind. JSONDecoder, the general path, cost more than the rest of serving the request.
///
/// It reads only what JSONDecoder reads the same way and `MessagePost.decode` accepts:
/// anything else (an unknown or repeated member, a value of another type, a number with a
/// fraction or an exponent, one out of its member's range, a lone surrogate, bytes that are
/// not UTF-8, text after the object) gives nil, and the general path decides and names
/// what is wrong, so refusals read the same whichever path met the body.
enum MessagePostReader {
    static func read(_ body: [UInt8]) -> MessagePost? {
        body.withUnsafeBufferPointer { bytes in
            var reader = Cursor(bytes: bytes)
            guard let post = reader.message(), reader.atEnd else { return nil }
            return post
        }
    }

    private struct Cursor {
        let bytes: UnsafeBufferPointer<UInt8>
        var at = 0

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        var atEnd: Bool {
            mutating get {
                skipSpace()
                return at == bytes.count
            }
        }

        private var next: UInt8? { at < bytes.count ? bytes[at] : nil }

        private mutating func skipSpace() {
            while at < bytes.count {
                switch bytes[at] {
                case 0x20, 0x09, 0x0A, 0x0D: at += 1
                default: return
                }
            }
        }

        /// Skips space, then takes `byte` if it is next.
        private mutating func take(_ byte: UInt8) -> Bool {
            skipSpace()
            guard next == byte else { return false }
            at += 1
            return true
        }

        // Members by their bit, so that one given twice is seen.
        private static let recipient: UInt16 = 1, text: UInt16 = 2, payload: UInt16 = 4, ttl: UInt16 = 8,
                           readLimit: UInt16 = 16, push: UInt16 = 32
        private static let device: UInt16 = 1, tag: UInt16 = 2, alert: UInt16 = 4, priority: UInt16 = 8,
                           collapseKey: UInt16 = 16, pushTTL: UInt16 = 32

        mutating func message() -> MessagePost? {
            guard take(UInt8(ascii: "{")) else { return nil }
            var seen: UInt16 = 0
            var recipient: String?
            var text: [UInt8]?
            var payload: String?
            var ttlSeconds: UInt32?
            var readLimit: UInt32?
            var push: MessagePost.PushOptions?
            if !take(UInt8(ascii: "}")) {
                repeat {
                    guard let name = key() else { return nil }
                    let member: UInt16
                    switch name {
                    case .recipient:
                        member = Cursor.recipient
                        guard let value = string() else { return nil }
                        recipient = String(decoding: value, as: UTF8.self)
                    case .text:
                        member = Cursor.text
                        if !null() {
                            guard let value = string() else { return nil }
                            text = value
                        }
                    case .payload:
                        member = Cursor.payload
                        if !null() {
                            guard let value = string() else { return nil }
                            payload = String(decoding: value, as: UTF8.self)
                        }
                    case .ttl:
                        member = Cursor.ttl
                        guard integer(&ttlSeconds) else { return nil }
                    case .readLimit:
                        member = Cursor.readLimit
                        guard integer(&readLimit) else { return nil }
                    case .push:
                        member = Cursor.push
                        if !null() {
                            guard let options = pushOptions() else { return nil }
                            push = options
                        }
                    default: return nil
                    }
                    guard seen & member == 0 else { return nil }
                    seen |= member
                } while take(UInt8(ascii: ","))
                guard take(UInt8(ascii: "}")) else { return nil }
            }
            guard let recipient else { return nil }
            return MessagePost(recipient: recipient, text: text, payload: payload, ttlSeconds: ttlSeconds, readLimit: readLimit, push: push)
        }

        private mutating func pushOptions() -> MessagePost.PushOptions? {
            guard take(UInt8(ascii: "{")) else { return nil }
            var options = MessagePost.PushOptions()
            guard !take(UInt8(ascii: "}")) else { return options }
            var seen: UInt16 = 0
            repeat {
                guard let name = key() else { return nil }
                let member: UInt16
                switch name {
                case .device:
                    member = Cursor.device
                    guard optionalString(&options.device) else { return nil }
                case .tag:
                    member = Cursor.tag
                    guard optionalString(&options.tag) else { return nil }
                case .collapseKey:
                    member = Cursor.collapseKey
                    guard optionalString(&options.collapseKey) else { return nil }
                case .alert:
                    member = Cursor.alert
                    if !null() {
                        guard let value = boolean() else { return nil }
                        options.alert = value
                    }
                case .priority:
                    member = Cursor.priority
                    guard integer(&options.priority) else { return nil }
                case .ttl:
                    member = Cursor.pushTTL
                    guard integer(&options.ttlSeconds) else { return nil }
                default: return nil
                }
                guard seen & member == 0 else { return nil }
                seen |= member
            } while take(UInt8(ascii: ","))
            guard take(UInt8(ascii: "}")) else { return nil }
            return options
        }

        private enum Key {
            case recipient, text, payload, ttl, readLimit, push, device, tag, alert, priority, collapseKey
        }

        /// A member's name and the colon after it; nil for a name written with escapes or
        /// not known at all (the general path names it).
        private mutating func key() -> Key? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            let start = at
            while at < bytes.count, bytes[at] != UInt8(ascii: "\""), bytes[at] != UInt8(ascii: "\\") { at += 1 }
            guard at < bytes.count, bytes[at] == UInt8(ascii: "\"") else { return nil }
            let name = UnsafeBufferPointer(rebasing: bytes[start..<at])
            at += 1
            guard take(UInt8(ascii: ":")) else { return nil }
            func equals(_ word: StaticString) -> Bool {
                name.elementsEqual(UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount))
            }
            switch name.count {
            case 3: return equals("tag") ? .tag : nil
            case 4: return equals("text") ? .text : equals("push") ? .push : nil
            case 5: return equals("ttl_s") ? .ttl : equals("alert") ? .alert : nil
            case 6: return equals("device") ? .device : nil
            case 7: return equals("payload") ? .payload : nil
            case 8: return equals("priority") ? .priority : nil
            case 9: return equals("recipient") ? .recipient : nil
            case 10: return equals("read_limit") ? .readLimit : nil
            case 12: return equals("collapse_key") ? .collapseKey : nil
            default: return nil
            }
        }

        /// `null`, taken if it is next.
        private mutating func null() -> Bool {
            skipSpace()
            guard bytes.count - at >= 4, bytes[at] == UInt8(ascii: "n"), bytes[at + 1] == UInt8(ascii: "u"),
                  bytes[at + 2] == UInt8(ascii: "l"), bytes[at + 3] == UInt8(ascii: "l") else { return false }
            at += 4
            return true
        }

        private mutating func boolean() -> Bool? {
            skipSpace()
            if bytes.count - at >= 4, bytes[at] == UInt8(ascii: "t"), bytes[at + 1] == UInt8(ascii: "r"),
               bytes[at + 2] == UInt8(ascii: "u"), bytes[at + 3] == UInt8(ascii: "e") {
                at += 4
                return true
            }
            if bytes.count - at >= 5, bytes[at] == UInt8(ascii: "f"), bytes[at + 1] == UInt8(ascii: "a"),
               bytes[at + 2] == UInt8(ascii: "l"), bytes[at + 3] == UInt8(ascii: "s"), bytes[at + 4] == UInt8(ascii: "e") {
                at += 5
                return false
            }
            return nil
        }

        private mutating func optionalString(_ value: inout String?) -> Bool {
            if null() { return true }
            guard let bytes = string() else { return false }
            value = String(decoding: bytes, as: UTF8.self)
            return true
        }

        /// An integer written as digits alone (`-0` too), within `T`; `null` leaves it nil.
        /// false for anything else: a fraction, an exponent, a leading zero, a number out
        /// of range, another type.
        private mutating func integer<T: FixedWidthInteger & UnsignedInteger>(_ value: inout T?) -> Bool {
            if null() { return true }
            var negative = false
            if next == UInt8(ascii: "-") {
                negative = true
                at += 1
            }
            let start = at
            var number: UInt64 = 0
            while at < bytes.count, bytes[at] >= UInt8(ascii: "0"), bytes[at] <= UInt8(ascii: "9") {
                guard at - start < 18 else { return false }
                number = number * 10 + UInt64(bytes[at] - UInt8(ascii: "0"))
                at += 1
            }
            let digits = at - start
            guard digits > 0, digits == 1 || bytes[start] != UInt8(ascii: "0") else { return false }
            if let after = next, after == UInt8(ascii: ".") || after == UInt8(ascii: "e") || after == UInt8(ascii: "E") { return false }
            guard !negative || number == 0, number <= UInt64(T.max) else { return false }
            value = T(number)
            return true
        }

        /// A string's value as UTF-8, escapes undone; nil for anything JSON or UTF-8 does
        /// not allow, and for a lone surrogate (which JSONDecoder may read otherwise).
        private mutating func string() -> [UInt8]? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            let start = at
            // Most strings have no escapes: their value is a slice of the body. The bytes
            // are OR-ed together: any of them at 0x80 or above makes the string not ASCII.
            var seen: UInt8 = 0
            while at < bytes.count {
                let byte = bytes[at]
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 { break }
                seen |= byte
                at += 1
            }
            var ascii = seen < 0x80
            guard at < bytes.count, bytes[at] >= 0x20 else { return nil }
            var value = Array(UnsafeBufferPointer(rebasing: bytes[start..<at]))
            if bytes[at] == UInt8(ascii: "\\") {
                guard unescape(into: &value, ascii: &ascii) else { return nil }
            }
            at += 1
            if !ascii {
                guard value.withUnsafeBufferPointer({ String(validating: $0, as: UTF8.self) }) != nil else { return nil }
            }
            return value
        }

        /// The rest of a string from its first backslash up to its closing quote (left at
        /// `at`), appended to `value`.
        private mutating func unescape(into value: inout [UInt8], ascii: inout Bool) -> Bool {
            while at < bytes.count {
                let byte = bytes[at]
                switch byte {
                case UInt8(ascii: "\""): return true
                case 0..<0x20: return false
                case UInt8(ascii: "\\"):
                    guard at + 1 < bytes.count else { return false }
                    let escape = bytes[at + 1]
                    at += 2
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): value.append(escape)
                    case UInt8(ascii: "b"): value.append(0x08)
                    case UInt8(ascii: "f"): value.append(0x0C)
                    case UInt8(ascii: "n"): value.append(0x0A)
                    case UInt8(ascii: "r"): value.append(0x0D)
                    case UInt8(ascii: "t"): value.append(0x09)
                    case UInt8(ascii: "u"):
                        guard var scalar = hex4() else { return false }
                        if scalar >= 0xDC00 && scalar <= 0xDFFF { return false }
                        if scalar >= 0xD800 && scalar <= 0xDBFF {
                            guard bytes.count - at >= 6, bytes[at] == UInt8(ascii: "\\"), bytes[at + 1] == UInt8(ascii: "u") else { return false }
                            at += 2
                            guard let low = hex4(), low >= 0xDC00, low <= 0xDFFF else { return false }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard let unicode = Unicode.Scalar(scalar) else { return false }
                        if scalar >= 0x80 { ascii = false }
                        UTF8.encode(unicode) { value.append($0) }
                    default: return false
                    }
                default:
                    if byte >= 0x80 { ascii = false }
                    value.append(byte)
                    at += 1
                }
            }
            return false
        }

        private mutating func hex4() -> UInt32? {
            guard bytes.count - at >= 4 else { return nil }
            var scalar: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[at]
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: return nil
                }
                scalar = scalar << 4 | UInt32(digit)
                at += 1
            }
            return scalar
        }
    }
}
