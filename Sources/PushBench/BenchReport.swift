import Histogram

/// What one benchmark run measured: throughput, latency percentiles and errors, as a
/// table line for people and one JSON object for scripts.
public struct BenchReport: Sendable {
    public var scenario: String
    public var parameters: [(String, String)]
    public var operations: UInt64
    public var seconds: Double
    /// Latencies in microseconds.
    public var latency: Histogram<UInt64>
    public var errors: [String: UInt64] = [:]
    public var extra: [(String, Double)] = []

    public init(scenario: String, parameters: [(String, String)], operations: UInt64, seconds: Double, latency: Histogram<UInt64>) {
        self.scenario = scenario
        self.parameters = parameters
        self.operations = operations
        self.seconds = seconds
        self.latency = latency
    }

    public var throughputPerSecond: Double { seconds > 0 ? Double(operations) / seconds : 0 }
    public var errorCount: UInt64 { errors.values.reduce(0, +) }

    private var percentiles: [(String, UInt64)] {
        guard latency.totalCount > 0 else { return [("p50", 0), ("p90", 0), ("p99", 0), ("p999", 0), ("max", 0)] }
        return [("p50", latency.valueAtPercentile(50)), ("p90", latency.valueAtPercentile(90)),
                ("p99", latency.valueAtPercentile(99)), ("p999", latency.valueAtPercentile(99.9)), ("max", latency.max)]
    }

    public var text: String {
        var lines = ["\(scenario): " + parameters.map { "\($0.0)=\($0.1)" }.joined(separator: " ")]
        lines.append("  throughput  \(formatted(throughputPerSecond)) ops/s  (\(operations) ops in \(formatted(seconds)) s)")
        lines.append("  latency us  " + percentiles.map { "\($0.0) \($0.1)" }.joined(separator: "  "))
        lines.append("  errors      \(errorCount)" + (errors.isEmpty ? "" : "  " + errors.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")))
        for (key, value) in extra { lines.append("  \(key)  \(formatted(value))") }
        return lines.joined(separator: "\n")
    }

    public var json: String {
        var fields = ["\"scenario\":\(quoted(scenario))", "\"throughput_per_s\":\(formatted(throughputPerSecond))",
                      "\"operations\":\(operations)", "\"seconds\":\(formatted(seconds))",
                      "\"latency_us\":{" + percentiles.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}",
                      "\"errors\":\(errorCount)",
                      "\"errors_by_status\":{" + errors.sorted { $0.key < $1.key }.map { "\(quoted($0.key)):\($0.value)" }.joined(separator: ",") + "}"]
        fields += extra.map { "\(quoted($0.0)):\(formatted($0.1))" }
        fields += parameters.map { "\(quoted($0.0)):\(quoted($0.1))" }
        return "{" + fields.joined(separator: ",") + "}"
    }

    /// A JSON string literal: error reasons can carry quotes or control characters.
    private func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    private func formatted(_ value: Double) -> String {
        value >= 100 ? String(Int(value.rounded())) : String(Double(Int(value * 100)) / 100)
    }
}

/// A latency histogram from 1 us to 60 s with three significant digits.
public func makeLatencyHistogram() -> Histogram<UInt64> {
    Histogram<UInt64>(lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
}
