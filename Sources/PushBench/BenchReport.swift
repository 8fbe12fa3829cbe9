import Histogram

/// What one benchmark run measured: throughput, latency percentiles and errors, as a
/// table for people and one JSON object for scripts (every count and setting a JSON
/// number), with the version that ran and when.
public struct BenchReport: Sendable {
    public var scenario: String
    public var parameters: [(String, ReportValue)]
    public var operations: UInt64
    public var seconds: Double
    /// Latencies in microseconds.
    public var latency: Histogram<UInt64>
    /// Failures by reason (a status name, "timeout", "lost", a connect error): every one
    /// is an operation or connection that did not succeed.
    public var errors: [String: UInt64] = [:]
    public var extra: [(String, Double)] = []
    /// The securepush version that ran the bench, when the caller knows it.
    public var version: String?
    /// When the run started, in seconds since the epoch.
    public var startedAt: Int

    public init(scenario: String, parameters: [(String, ReportValue)], operations: UInt64, seconds: Double,
                latency: Histogram<UInt64>, startedAt: Int = Timestamp.now()) {
        self.scenario = scenario
        self.parameters = parameters
        self.operations = operations
        self.seconds = seconds
        self.latency = latency
        self.startedAt = startedAt
    }

    public var throughputPerSecond: Double { seconds > 0 ? Double(operations) / seconds : 0 }
    public var errorCount: UInt64 { errors.values.reduce(0, +) }
    public var timestamp: String { Timestamp.iso8601(secondsSinceEpoch: startedAt) }

    /// The latency percentiles the table and the JSON show, in microseconds.
    public var percentiles: [(String, UInt64)] {
        guard latency.totalCount > 0 else { return [("p50", 0), ("p90", 0), ("p99", 0), ("p999", 0), ("max", 0)] }
        return [("p50", latency.valueAtPercentile(50)), ("p90", latency.valueAtPercentile(90)),
                ("p99", latency.valueAtPercentile(99)), ("p999", latency.valueAtPercentile(99.9)), ("max", latency.max)]
    }

    /// The failures as `reason=count`, sorted, for one line of text.
    public var errorSummary: String {
        errors.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
    }

    public var text: String {
        var lines = ["\(scenario): " + parameters.map { "\($0.0)=\($0.1.display)" }.joined(separator: " ")]
        lines.append("  started     \(timestamp)" + (version.map { " by securepush \($0)" } ?? ""))
        lines.append("  throughput  \(jsonNumber(throughputPerSecond)) ops/s  (\(operations) ops in \(jsonNumber(seconds)) s)")
        lines.append("  latency us  " + percentiles.map { "\($0.0) \($0.1)" }.joined(separator: "  "))
        lines.append("  errors      \(errorCount)" + (errors.isEmpty ? "" : "  " + errorSummary))
        for (key, value) in extra { lines.append("  \(key)  \(jsonNumber(value))") }
        return lines.joined(separator: "\n")
    }

    public var json: String {
        var fields = ["\"scenario\":\(jsonString(scenario))"]
        if let version { fields.append("\"version\":\(jsonString(version))") }
        fields += ["\"timestamp\":\(jsonString(timestamp))",
                   "\"throughput_per_s\":\(jsonNumber(throughputPerSecond))",
                   "\"operations\":\(operations)", "\"seconds\":\(jsonNumber(seconds))",
                   "\"latency_us\":{" + percentiles.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}",
                   "\"errors\":\(errorCount)",
                   "\"errors_by_status\":{" + errors.sorted { $0.key < $1.key }.map { "\(jsonString($0.key)):\($0.value)" }.joined(separator: ",") + "}"]
        fields += extra.map { "\(jsonString($0.0)):\(jsonNumber($0.1))" }
        fields += parameters.map { "\(jsonString($0.0)):\($0.1.json)" }
        return "{" + fields.joined(separator: ",") + "}"
    }

    /// The latency distribution in HdrHistogram's percentile format (.hgrm), values in
    /// microseconds: recorded in microseconds and written with a value unit scaling ratio
    /// of 1. HdrHistogram's plotter and most tools that read .hgrm take it as is.
    public var percentileDistribution: String {
        var text = ""
        latency.outputPercentileDistribution(to: &text, outputValueUnitScalingRatio: 1, percentileTicksPerHalfDistance: 5)
        return text
    }
}

/// A latency histogram from 1 us to 60 s with three significant digits.
public func makeLatencyHistogram() -> Histogram<UInt64> {
    Histogram<UInt64>(lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
}
