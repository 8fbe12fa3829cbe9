#if canImport(Glibc)
import Glibc
#endif
import Histogram

/// The latency percentile curve of a run as a standalone SVG, written by hand so the
/// bench needs no plotting library: x is the percentile on HdrHistogram's usual scale
/// (1/(1-p), log10: one decade per extra nine), y the latency, linear from 0.
public struct LatencyPlot {
    public var report: BenchReport

    public init(report: BenchReport) { self.report = report }

    // The canvas and the plot area inside it.
    static let width = 960.0, height = 600.0
    static let left = 96.0, right = 900.0, top = 112.0, bottom = 528.0

    /// Samples per decade of the x axis (per added nine).
    static let samplesPerDecade = 20

    /// The curve's points: (1/(1-p), latency in us), evenly spaced on the log axis up to
    /// the last percentile the samples resolve (1/(1-p) = their count), where the curve
    /// meets the maximum. Taken with `valueAtPercentile`, so the marked p50/p99 values
    /// and the legend lie on the curve.
    var points: [(x: Double, micros: Double)] {
        let count = Double(report.latency.totalCount)
        guard count > 0 else { return [] }
        var result: [(x: Double, micros: Double)] = []
        var step = 0
        while true {
            let x = Glibc.pow(10, Double(step) / Double(Self.samplesPerDecade))
            guard x < count else { break }
            result.append((x, Double(report.latency.valueAtPercentile(100 * (1 - 1 / x)))))
            step += 1
        }
        result.append((max(count, 1), Double(report.latency.max)))
        return result
    }

    /// Decades on the x axis: at least 0 % to 99.999 %, more when the run had the samples.
    static func decades(forLargestX largest: Double) -> Int {
        var decades = 5
        while decades < 9, largest > pow10(decades) { decades += 1 }
        return decades
    }

    /// "0%", "90%", "99%", "99.9%", ... for decade 0, 1, 2, 3, ...
    static func percentileLabel(decade: Int) -> String {
        switch decade {
        case 0: "0%"
        case 1: "90%"
        case 2: "99%"
        default: "99." + String(repeating: "9", count: decade - 2) + "%"
        }
    }

    /// Up to about six round steps (1, 2 or 5 times a power of ten) covering `maximum`.
    static func yScale(maximum: Double) -> (step: Double, top: Double) {
        let target = max(maximum, 1) / 5
        var magnitude = 1.0
        while magnitude * 10 <= target { magnitude *= 10 }
        while magnitude > target { magnitude /= 10 }
        let step = [1.0, 2, 5, 10].map { $0 * magnitude }.first { $0 >= target } ?? magnitude * 10
        let top = (max(maximum, 1) / step).rounded(.up) * step
        return (step, top)
    }

    public var svg: String {
        let points = self.points
        let maxMicros = Double(report.latency.max)
        let decades = Self.decades(forLargestX: points.last?.x ?? 1)
        // Milliseconds once the values reach five digits of microseconds.
        let inMillis = maxMicros >= 10_000
        let unit = inMillis ? "ms" : "µs"
        let divisor = inMillis ? 1_000.0 : 1.0
        let (step, yTop) = Self.yScale(maximum: maxMicros / divisor)

        func px(_ x: Double) -> Double { Self.left + (Self.right - Self.left) * log10(max(x, 1)) / Double(decades) }
        func py(_ micros: Double) -> Double { Self.bottom - (Self.bottom - Self.top) * (micros / divisor) / yTop }

        var svg = SVGWriter(width: Self.width, height: Self.height)
        svg.rect(x: 0, y: 0, width: Self.width, height: Self.height, fill: "#ffffff")
        svg.text("securepush bench \(report.scenario): latency by percentile", x: Self.left, y: 34, size: 20, weight: "bold")
        let runLine = ["securepush " + (report.version ?? "(version unknown)"), report.timestamp,
                       "\(report.operations) operations in \(jsonNumber(report.seconds)) s", "errors \(report.errorCount)"]
        svg.text(runLine.joined(separator: "  ·  "), x: Self.left, y: 58, size: 13, fill: "#333333")
        for (index, line) in Self.wrapped(report.parameters.map { "\($0.0)=\($0.1.display)" }, width: 120).prefix(2).enumerated() {
            svg.text(line, x: Self.left, y: 78 + Double(index) * 16, size: 12, fill: "#666666")
        }

        // Grid, ticks and tick labels.
        for decade in 0...decades {
            let x = px(Self.pow10(decade))
            svg.line(x1: x, y1: Self.top, x2: x, y2: Self.bottom, stroke: "#dddddd")
            svg.text(Self.percentileLabel(decade: decade), x: x, y: Self.bottom + 20, size: 12, anchor: "middle")
        }
        var value = 0.0
        while value <= yTop + step / 2 {
            let y = Self.bottom - (Self.bottom - Self.top) * value / yTop
            svg.line(x1: Self.left, y1: y, x2: Self.right, y2: y, stroke: "#dddddd")
            svg.text(Self.tickLabel(value, step: step), x: Self.left - 8, y: y + 4, size: 12, anchor: "end")
            value += step
        }
        svg.rect(x: Self.left, y: Self.top, width: Self.right - Self.left, height: Self.bottom - Self.top, stroke: "#888888")
        svg.text("Percentile (log scale of 1/(1-p))", x: (Self.left + Self.right) / 2, y: Self.bottom + 48, size: 14, anchor: "middle")
        svg.text("Latency (\(unit))", x: 24, y: (Self.top + Self.bottom) / 2, size: 14, anchor: "middle", rotate: -90)

        guard !points.isEmpty else {
            svg.text("no operation completed", x: (Self.left + Self.right) / 2, y: (Self.top + Self.bottom) / 2, size: 18,
                     anchor: "middle", fill: "#aa0000")
            return svg.finish()
        }
        // The maximum, which has no finite place on this axis, as a dashed line.
        svg.line(x1: Self.left, y1: py(maxMicros), x2: Self.right, y2: py(maxMicros), stroke: "#cc3333", dashed: true)
        svg.text("max \(Self.readable(maxMicros / divisor)) \(unit)", x: Self.right - 6, y: py(maxMicros) - 6,
                 size: 12, anchor: "end", fill: "#cc3333")
        svg.polyline(points.map { (px($0.x), py($0.micros)) }, stroke: "#1f5fbf", width: 2.5, id: "latency-curve")

        // The usual percentiles, marked on the curve and listed in a box at the bottom
        // right, which a rising curve leaves empty.
        let marks: [(String, Double)] = [("p50", 50), ("p90", 90), ("p99", 99), ("p99.9", 99.9)]
        var legend: [(String, String)] = []
        for (name, percentile) in marks {
            let micros = Double(report.latency.valueAtPercentile(percentile))
            legend.append((name, "\(Self.readable(micros / divisor)) \(unit)"))
            let x = 1 / (1 - percentile / 100)
            guard x <= points.last?.x ?? 1 else { continue }
            svg.circle(cx: px(x), cy: py(micros), r: 4, fill: "#1f5fbf")
        }
        legend.append(("max", "\(Self.readable(maxMicros / divisor)) \(unit)"))
        let boxWidth = 170.0, boxHeight = Double(legend.count) * 18 + 12
        let boxLeft = Self.right - 12 - boxWidth, boxTop = Self.bottom - 12 - boxHeight
        svg.rect(x: boxLeft, y: boxTop, width: boxWidth, height: boxHeight, fill: "#ffffff", stroke: "#bbbbbb")
        for (index, (name, value)) in legend.enumerated() {
            let y = boxTop + 21 + Double(index) * 18
            svg.text(name, x: boxLeft + 12, y: y, size: 13)
            svg.text(value, x: boxLeft + boxWidth - 12, y: y, size: 13, anchor: "end")
        }
        return svg.finish()
    }

    /// Words joined by two spaces into lines of at most `width` characters.
    static func wrapped(_ words: [String], width: Int) -> [String] {
        var lines: [String] = []
        var line = ""
        for word in words {
            if !line.isEmpty, line.count + 2 + word.count > width {
                lines.append(line)
                line = ""
            }
            line += (line.isEmpty ? "" : "  ") + word
        }
        if !line.isEmpty { lines.append(line) }
        return lines
    }

    static func pow10(_ exponent: Int) -> Double {
        var value = 1.0
        for _ in 0..<exponent { value *= 10 }
        return value
    }

    /// A latency with three significant digits (all of them from 100 up).
    static func readable(_ value: Double) -> String {
        value >= 100 ? String(Int(value.rounded())) : tickLabel(value, step: value >= 10 ? 0.1 : 0.01)
    }

    /// A value with as many decimals as the step needs (none for whole steps).
    static func tickLabel(_ value: Double, step: Double) -> String {
        guard step < 1 else { return String(Int(value.rounded())) }
        let decimals = step >= 0.1 ? 1 : step >= 0.01 ? 2 : 3
        let scale = pow10(decimals)
        let scaled = Int((value * scale).rounded())
        let whole = String(scaled / Int(scale))
        var fraction = String(scaled % Int(scale))
        fraction = String(repeating: "0", count: decimals - fraction.count) + fraction
        return whole + "." + fraction
    }
}
