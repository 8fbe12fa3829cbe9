#if canImport(Glibc)
import Glibc
#endif
import Logging
import PushText

/// Log lines as JSON objects, one per line, for log shippers: `timestamp` (ISO-8601 in
/// local time with its UTC offset and milliseconds), `level`, `label`, `message` and
/// `metadata` (an object; nested metadata stays nested).
public struct JSONLogHandler: LogHandler {
    public typealias Sink = @Sendable (String) -> Void

    public let label: String
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let sink: Sink

    /// - Parameter sink: receives each line, newline included; standard error by default.
    public init(label: String, metadataProvider: Logger.MetadataProvider? = nil, sink: @escaping Sink = JSONLogHandler.standardError) {
        self.label = label
        self.metadataProvider = metadataProvider
        self.sink = sink
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var all = metadata
        if let provided = metadataProvider?.get() { all.merge(provided) { $1 } }
        if let own = event.metadata { all.merge(own) { $1 } }
        sink(JSONLogHandler.line(timestamp: JSONLogHandler.timestamp(), level: event.level, label: label,
                                 message: event.message.description, metadata: all))
    }

    /// One JSON object and a newline.
    public static func line(timestamp: String, level: Logger.Level, label: String, message: String, metadata: Logger.Metadata) -> String {
        var out = "{\"timestamp\":"
        appendString(timestamp, to: &out)
        out += ",\"level\":"
        appendString(level.rawValue, to: &out)
        out += ",\"label\":"
        appendString(label, to: &out)
        out += ",\"message\":"
        appendString(message, to: &out)
        out += ",\"metadata\":"
        appendObject(metadata, to: &out)
        out += "}\n"
        return out
    }

    /// Now, as `2026-11-23T21:14:05.123+01:00`.
    public static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var local = tm()
        localtime_r(&seconds, &local)
        var buffer = [CChar](repeating: 0, count: 32)
        let length = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S", &local)
        let milliseconds = Int(now.tv_nsec / 1_000_000)
        let offsetMinutes = Int(local.tm_gmtoff / 60)
        let sign = offsetMinutes < 0 ? "-" : "+"
        let date = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return date + "." + padded(milliseconds, 3) + sign + padded(abs(offsetMinutes) / 60, 2) + ":" + padded(abs(offsetMinutes) % 60, 2)
    }

    /// Writes a line with one write(2), so lines from threads do not interleave.
    public static let standardError: Sink = { line in
        var bytes = Array(line.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeMutableBytes { write(STDERR_FILENO, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
    }

    // MARK: JSON

    private static func padded(_ value: Int, _ width: Int) -> String {
        let text = String(value)
        return String(repeating: "0", count: max(0, width - text.count)) + text
    }

    private static func appendObject(_ metadata: Logger.Metadata, to out: inout String) {
        out += "{"
        for (index, key) in metadata.keys.sorted().enumerated() {
            if index > 0 { out += "," }
            appendString(key, to: &out)
            out += ":"
            appendValue(metadata[key] ?? .string(""), to: &out)
        }
        out += "}"
    }

    private static func appendValue(_ value: Logger.MetadataValue, to out: inout String) {
        switch value {
        case .string(let text): appendString(text, to: &out)
        case .stringConvertible(let convertible): appendString(convertible.description, to: &out)
        case .dictionary(let dictionary): appendObject(dictionary, to: &out)
        case .array(let array):
            out += "["
            for (index, element) in array.enumerated() {
                if index > 0 { out += "," }
                appendValue(element, to: &out)
            }
            out += "]"
        }
    }

    static func appendString(_ text: String, to out: inout String) {
        JSONText.appendQuoted(text, to: &out)
    }
}
