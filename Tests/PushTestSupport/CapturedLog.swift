import Logging
import Synchronization

/// Keeps every log line a service writes, so a test can look through them.
public final class CapturedLog: Sendable {
    private let lines = Mutex<[String]>([])

    public init() {}

    /// A logger at `level` that writes here.
    public func logger(label: String, level: Logger.Level = .trace) -> Logger {
        var logger = Logger(label: label) { _ in CapturingHandler(log: self) }
        logger.logLevel = level
        return logger
    }

    public var text: String { lines.withLock { $0.joined(separator: "\n") } }

    fileprivate func append(_ line: String) { lines.withLock { $0.append(line) } }
}

private struct CapturingHandler: LogHandler {
    let log: CapturedLog
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        log.append("\(event.level) \(event.message) \(all.map { "\($0)=\($1)" }.sorted().joined(separator: " "))")
    }
}

extension Logger {
    /// A logger that drops everything: services in tests stay quiet unless asked.
    public static func silent(_ label: String) -> Logger {
        Logger(label: label) { _ in SwiftLogNoOpLogHandler() }
    }
}
