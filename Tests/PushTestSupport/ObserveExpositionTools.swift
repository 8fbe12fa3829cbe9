import Foundation
import PushProcess

/// The Prometheus project's own checkers of the text format, where the machine has them:
/// `promtool check metrics` (Debian's `prometheus` package; `$PROMTOOL` or `promtool` on
/// PATH) and the official Python client's parser (Debian's `python3-prometheus-client`).
/// Tests that use them are enabled only where they are found; the strict Swift reader
/// (`MetricsExposition`) runs everywhere.
public enum PrometheusTools {
    /// promtool's path, if any.
    public static let promtool: String? = {
        if let path = ProcessInfo.processInfo.environment["PROMTOOL"], FileManager.default.isExecutableFile(atPath: path) {
            return path
        }
        return searchPath("promtool")
    }()

    /// A python3 that can import `prometheus_client.parser`, if any.
    public static let pythonWithClient: String? = {
        let candidates = ["/usr/bin/python3", searchPath("python3")].compactMap { $0 }
        return candidates.first { python in
            (try? ChildProcess.run(executable: python, arguments: ["-c", "import prometheus_client.parser"], seconds: 30))?.status == 0
        }
    }()

    /// `promtool check metrics` on `text`: nil when it is clean, else what it said.
    public static func promtoolProblems(_ text: String) throws -> String? {
        guard let promtool else { return "promtool not found" }
        let result = try ChildProcess.run(executable: promtool, arguments: ["check", "metrics"], stdinText: text, seconds: 60)
        let said = (result.stdout + result.stderr).trimmingCharacters(in: .whitespacesAndNewlines)
        return result.status == 0 && said.isEmpty ? nil : "exit \(result.status): \(said)"
    }

    /// The families the Python client's parser reads from `text`, as `name type samples`
    /// lines; throws with the parser's error if it refuses the text.
    public static func pythonParse(_ text: String) throws -> [String] {
        guard let python = pythonWithClient else { throw PrometheusToolFailure(text: "python3 with prometheus_client not found") }
        let script = """
        import sys
        from prometheus_client.parser import text_string_to_metric_families
        for family in text_string_to_metric_families(sys.stdin.read()):
            print(family.name, family.type, len(family.samples))
        """
        let result = try ChildProcess.run(executable: python, arguments: ["-c", script], stdinText: text, seconds: 60)
        guard result.status == 0 else { throw PrometheusToolFailure(text: result.stderr) }
        return result.stdout.split(separator: "\n").map(String.init)
    }

    private static func searchPath(_ name: String) -> String? {
        let directories = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":")
        return directories.map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}

public struct PrometheusToolFailure: Error, CustomStringConvertible {
    public var text: String
    public var description: String { text }
}
