#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The one rule for the names the protocol compares ([3.3-8]): user names, device ids,
/// tags, collapse keys and idempotency keys. An identifier is UTF-8 without a control character, and it is
/// compared as exact bytes: never cut at a NUL, never normalized.
///
/// The wire decoder applies it to the identifier fields of every body (`FieldSet`); the
/// command line, the HTTP API, the config file and the administration calls apply it
/// through `Identifier.check`, so that a name refused on one path is refused on all.
public enum Identifier {
    /// The kinds of identifier, with the limits SPEC.md 3.2 gives their fields.
    public enum Kind: Sendable, Equatable {
        case user, deviceID, tag, collapseKey, idempotencyKey

        /// Bytes at most (3.2's maximum length of the field that carries it).
        public var maxBytes: Int {
            switch self {
            case .idempotencyKey: 128
            case .user, .deviceID, .tag, .collapseKey: 64
            }
        }

        /// How a message names it.
        public var label: String {
            switch self {
            case .user: "a user name"
            case .deviceID: "a device id"
            case .tag: "a tag"
            case .collapseKey: "a collapse key"
            case .idempotencyKey: "an idempotency key"
            }
        }
    }

    /// Why a name is refused.
    public enum Fault: Error, Equatable, Sendable {
        case empty
        case tooLong(bytes: Int, max: Int)
        /// The first control character, as a scalar value, and its byte offset.
        case controlCharacter(scalar: UInt32, offset: Int)
    }

    /// A code point of Unicode's general category Cc: C0 (U+0000 to U+001F), DEL (U+007F)
    /// and C1 (U+0080 to U+009F). Format characters and the rest are allowed, and compared
    /// as bytes like any other character.
    public static func isControl(_ scalar: UInt32) -> Bool {
        scalar < 0x20 || (0x7F...0x9F).contains(scalar)
    }

    /// The first control character in well-formed UTF-8: C0 and DEL are single bytes, and
    /// C1 is `c2 80` to `c2 9f` (in well-formed UTF-8 `c2` is always a lead byte).
    public static func controlCharacter(in bytes: UnsafeRawBufferPointer) -> (scalar: UInt32, offset: Int)? {
        var offset = 0
        while offset < bytes.count {
            let byte = bytes[offset]
            if byte < 0x20 || byte == 0x7F { return (UInt32(byte), offset) }
            if byte == 0xC2, offset + 1 < bytes.count, (0x80...0x9F).contains(bytes[offset + 1]) {
                return (UInt32(bytes[offset + 1]), offset)
            }
            offset += 1
        }
        return nil
    }

    public static func controlCharacter(in text: String) -> (scalar: UInt32, offset: Int)? {
        var text = text
        return text.withUTF8 { controlCharacter(in: UnsafeRawBufferPointer($0)) }
    }

    /// What is wrong with `text` as an identifier of `kind`, or nil when it is one: 1 to
    /// `kind.maxBytes` bytes without a control character.
    public static func fault(in text: String, as kind: Kind) -> Fault? {
        let count = text.utf8.count
        if count == 0 { return .empty }
        if count > kind.maxBytes { return .tooLong(bytes: count, max: kind.maxBytes) }
        if let found = controlCharacter(in: text) { return .controlCharacter(scalar: found.scalar, offset: found.offset) }
        return nil
    }

    /// `text` as an identifier of `kind`, or the error that says why it is not one.
    public static func check(_ text: String, as kind: Kind) throws(IdentifierError) {
        if let fault = fault(in: text, as: kind) { throw IdentifierError(kind: kind, value: text, fault: fault) }
    }
}

/// A name refused by `Identifier.check`, with a message for an operator.
public struct IdentifierError: Error, Equatable, Sendable, CustomStringConvertible {
    public var kind: Identifier.Kind
    public var value: String
    public var fault: Identifier.Fault

    public init(kind: Identifier.Kind, value: String, fault: Identifier.Fault) {
        self.kind = kind
        self.value = value
        self.fault = fault
    }

    public var description: String {
        switch fault {
        case .empty: "\(kind.label) may not be empty"
        case .tooLong(let bytes, let max): "\(kind.label) is 1 to \(max) bytes; \(value.debugDescription) has \(bytes)"
        case .controlCharacter(let scalar, let offset):
            "\(kind.label) may not contain a control character: \(value.debugDescription) has \(Identifier.notation(scalar)) at byte \(offset)"
        }
    }
}

extension Identifier {
    /// `U+0000`.
    public static func notation(_ scalar: UInt32) -> String {
        let digits = String(scalar, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}

/// A string compared and hashed by its UTF-8 bytes, as the protocol compares names
/// ([3.3-8]). Swift's own `String` equality is canonical equivalence, under which "zoë"
/// (NFC) and "zoë" (NFD) are equal though they are two users; every map or set keyed by a
/// name, in the store and at the gateway, uses this instead. Ordered by bytes too.
public struct ExactName: Hashable, Comparable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let text: String

    public init(_ text: String) { self.text = text }

    public init(stringLiteral text: String) { self.text = text }

    @inlinable
    public static func == (lhs: ExactName, rhs: ExactName) -> Bool { lhs.text.isExactly(rhs.text) }

    public static func < (lhs: ExactName, rhs: ExactName) -> Bool {
        lhs.text.utf8.lexicographicallyPrecedes(rhs.text.utf8)
    }

    @inlinable
    public func hash(into hasher: inout Hasher) {
        // A native string, small ones too, is contiguous UTF-8: hashed in place, as fast as
        // `String`'s own hash of a string known to be NFC.
        let hashed: Void? = text.utf8.withContiguousStorageIfAvailable { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        if hashed == nil { for byte in text.utf8 { hasher.combine(byte) } }
    }

    public var description: String { text }
}

extension String {
    /// The same UTF-8 bytes: the protocol's equality of names ([3.3-8]), where `==` is
    /// Unicode canonical equivalence.
    @inlinable
    public func isExactly(_ other: String) -> Bool {
        // Two contiguous buffers compared at once; the byte-by-byte walk through the views
        // made a device lookup keyed by `ExactName` about half as slow again as by `String`.
        let compared = utf8.withContiguousStorageIfAvailable { mine -> Bool? in
            other.utf8.withContiguousStorageIfAvailable { theirs -> Bool in
                guard mine.count == theirs.count else { return false }
                guard let first = mine.baseAddress, let second = theirs.baseAddress else { return true }
                return memcmp(first, second, mine.count) == 0
            }
        }
        return (compared ?? nil) ?? utf8.elementsEqual(other.utf8)
    }
}
