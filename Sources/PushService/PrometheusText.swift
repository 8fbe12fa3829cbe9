import PushText

/// Writes the Prometheus text exposition format, version 0.0.4: `# HELP` and `# TYPE`
/// lines, then one `name{labels} value` line per sample. Escapes help text and label
/// values as the format requires.
struct PrometheusText {
    private(set) var bytes: [UInt8] = []

    init() {
        bytes.reserveCapacity(8 * 1024)
    }

    mutating func header(_ name: String, help: String, kind: MetricsRegistry.Kind) {
        append("# HELP ")
        append(name)
        append(" ")
        append(BackslashEscapes.prometheusHelp.escaped(help))
        append("\n# TYPE ")
        append(name)
        append(" ")
        append(kind.rawValue)
        append("\n")
    }

    mutating func sample(_ name: String, suffix: String = "", labels: String, value: UInt64) {
        start(name, suffix: suffix, labels: labels)
        append(String(value))
        append("\n")
    }

    mutating func sample(_ name: String, labels: String, value: Int64) {
        start(name, suffix: "", labels: labels)
        append(String(value))
        append("\n")
    }

    mutating func sample(_ name: String, labels: String, value: Double) {
        start(name, suffix: "", labels: labels)
        append(PrometheusText.number(value))
        append("\n")
    }

    mutating func histogram(_ name: String, labels: String, _ histogram: MetricsSnapshot.Histogram) {
        let cumulative = histogram.cumulativeCounts
        let prefix = labels.isEmpty ? "" : labels + ","
        for (index, bound) in histogram.boundsNs.enumerated() {
            sample(name, suffix: "_bucket", labels: prefix + "le=\"" + PrometheusText.seconds(nanoseconds: bound) + "\"",
                   value: cumulative[index])
        }
        let total = cumulative[cumulative.count - 1]
        sample(name, suffix: "_bucket", labels: prefix + "le=\"+Inf\"", value: total)
        start(name, suffix: "_sum", labels: labels)
        append(PrometheusText.seconds(nanoseconds: histogram.sumNs))
        append("\n")
        sample(name, suffix: "_count", labels: labels, value: total)
    }

    private mutating func start(_ name: String, suffix: String, labels: String) {
        append(name)
        append(suffix)
        if !labels.isEmpty {
            append("{")
            append(labels)
            append("}")
        }
        append(" ")
    }

    private mutating func append(_ text: String) {
        bytes.append(contentsOf: text.utf8)
    }

    // MARK: pieces

    /// `a="x",b="y"`, values escaped; "" for no labels.
    static func labels(_ labels: MetricsRegistry.Labels) -> String {
        labels.map { name, value in name + "=\"" + escapeLabelValue(value) + "\"" }.joined(separator: ",")
    }

    static func escapeLabelValue(_ value: String) -> String {
        BackslashEscapes.prometheusLabel.escaped(value)
    }

    /// Exact decimal seconds: 50_000 ns is "0.00005", 2_500_000_000 ns is "2.5".
    static func seconds(nanoseconds: UInt64) -> String {
        let whole = nanoseconds / 1_000_000_000
        var fraction = nanoseconds % 1_000_000_000
        guard fraction > 0 else { return String(whole) }
        var digits = 9
        while fraction % 10 == 0 {
            fraction /= 10
            digits -= 1
        }
        let text = String(fraction)
        return String(whole) + "." + String(repeating: "0", count: digits - text.count) + text
    }

    /// A sample value: integers without a fraction, the special values as the format spells them.
    static func number(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 9_007_199_254_740_992 { return String(Int64(value)) }
        return String(value)
    }

    /// `[a-zA-Z_:][a-zA-Z0-9_:]*`
    static func isMetricName(_ name: String) -> Bool {
        guard let first = name.utf8.first, isNameStart(first) || first == UInt8(ascii: ":") else { return false }
        return name.utf8.allSatisfy { isNameStart($0) || isDigit($0) || $0 == UInt8(ascii: ":") }
    }

    /// `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__` (reserved).
    static func isLabelName(_ name: String) -> Bool {
        guard let first = name.utf8.first, isNameStart(first), !name.hasPrefix("__") else { return false }
        return name.utf8.allSatisfy { isNameStart($0) || isDigit($0) }
    }

    private static func isNameStart(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            || byte == UInt8(ascii: "_")
    }

    private static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }
}
