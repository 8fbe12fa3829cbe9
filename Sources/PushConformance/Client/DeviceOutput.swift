import PushClock
import PushWire

/// One line a device under test printed on stdout (SPEC Appendix B.2).
public enum DeviceOutputLine: Equatable, Sendable {
    case shown(ShownNotification)
    /// A line that is not in the contract's form: the contract allows nothing else on stdout.
    case unreadable(String)

    public init(_ line: String, atMs: Int64) {
        let words = line.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        guard words.count >= 3, words[0] == "SHOWN", words[1].utf8.count == 32, words[1] == words[1].lowercased(),
              let id = PayloadID(hex: words[1]) else {
            self = .unreadable(line)
            return
        }
        switch (words[2], words.count) {
        case ("GENERIC", 3):
            self = .shown(ShownNotification(id: id, content: .generic, atMs: atMs))
        case ("PAYLOAD", 3):
            self = .shown(ShownNotification(id: id, content: .payload([]), atMs: atMs))
        case ("PAYLOAD", 4) where !words[3].isEmpty:
            guard let bytes = [UInt8](hex: words[3]) else { fallthrough }
            self = .shown(ShownNotification(id: id, content: .payload(bytes), atMs: atMs))
        default:
            self = .unreadable(line)
        }
    }
}

/// A notification the device said it showed, and when the harness read the line.
public struct ShownNotification: Equatable, Sendable, CustomStringConvertible {
    public enum Content: Equatable, Sendable {
        case payload([UInt8])
        case generic
    }

    public var id: PayloadID
    public var content: Content
    /// `Clocks.monotonicMilliseconds()` when the harness read the line.
    public var atMs: Int64

    public var isGeneric: Bool { content == .generic }

    public var description: String {
        switch content {
        case .generic: "SHOWN \(id.hex) GENERIC"
        case .payload(let bytes): "SHOWN \(id.hex) PAYLOAD" + (bytes.isEmpty ? "" : " " + bytes.hexString)
        }
    }
}
