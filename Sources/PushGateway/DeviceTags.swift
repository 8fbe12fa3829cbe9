/// A device's tags, held as one string with "\n" between them, as its registration
/// carries them on the wire ([7.4-2]). The gateway keeps one per device, connected or
/// queued for: a `[String]` costs each device an array on the heap (about 48 bytes), while
/// tags up to 15 bytes in all fit in the string's own 16 bytes.
public struct DeviceTags: Sequence, Equatable, Sendable {
    private let text: String

    /// Tags contain no "\n" and are not empty ([7.4-2]); an empty one would be skipped.
    public init(_ tags: [String]) {
        text = tags.joined(separator: "\n")
    }

    public var isEmpty: Bool { text.isEmpty }

    /// The tags, in registration order.
    public var list: [String] { Array(self) }

    public func makeIterator() -> Iterator { Iterator(text: text) }

    /// Walks the text, allocating only for a tag longer than 15 bytes.
    public struct Iterator: IteratorProtocol {
        fileprivate let text: String
        private var position: String.Index

        fileprivate init(text: String) {
            self.text = text
            position = text.utf8.startIndex
        }

        public mutating func next() -> String? {
            let utf8 = text.utf8
            while position < utf8.endIndex, utf8[position] == DeviceTags.separator { position = utf8.index(after: position) }
            guard position < utf8.endIndex else { return nil }
            let end = utf8[position...].firstIndex(of: DeviceTags.separator) ?? utf8.endIndex
            defer { position = end }
            return String(text[position..<end])
        }
    }

    private static let separator = UInt8(ascii: "\n")
}
