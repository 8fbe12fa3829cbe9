/// Every family of a `MetricsRegistry` with every series' value, read at one moment on the
/// registry's loop (`MetricsRegistry.snapshot()`): plain values, so it may cross to
/// another thread, be merged with other loops' snapshots (`merged(_:)`) and rendered
/// there.
///
/// A registry's `render()` is its snapshot rendered, so the two are byte-identical.
public struct MetricsSnapshot: Sendable {
    public struct Family: Sendable {
        public var name: String
        public var help: String
        public var kind: MetricsRegistry.Kind
        /// In the order registered (a collected family's series in the order read).
        public var series: [Series]

        public init(name: String, help: String, kind: MetricsRegistry.Kind, series: [Series]) {
            self.name = name
            self.help = help
            self.kind = kind
            self.series = series
        }
    }

    public struct Series: Sendable {
        /// Rendered `name="value"` pairs, comma-separated, without braces; "" for none.
        /// Series of one family are matched across snapshots by this string.
        public var labels: String
        public var sample: Sample

        public init(labels: String, sample: Sample) {
            self.labels = labels
            self.sample = sample
        }

        /// A series with labels as (name, value) pairs, escaped as the registry does.
        public init(labels: MetricsRegistry.Labels, sample: Sample) {
            self.init(labels: PrometheusText.labels(labels), sample: sample)
        }
    }

    public enum Sample: Sendable, Equatable {
        case value(Value)
        case histogram(Histogram)
    }

    /// A counter's or gauge's value. Kept as the integer a `MetricCounter` or
    /// `MetricGauge` holds, rather than as a Double, so that a count beyond 2^53 renders
    /// exactly as the registry always rendered it.
    public enum Value: Sendable, Equatable {
        /// A `MetricCounter`.
        case count(UInt64)
        /// A `MetricGauge`.
        case level(Int64)
        /// A value read through a closure.
        case real(Double)

        public var double: Double {
            switch self {
            case .count(let count): Double(count)
            case .level(let level): Double(level)
            case .real(let real): real
            }
        }

        /// Integers of one kind add as integers, wrapping as the counters themselves do;
        /// anything else adds as Doubles.
        public static func + (left: Value, right: Value) -> Value {
            switch (left, right) {
            case (.count(let a), .count(let b)): .count(a &+ b)
            case (.level(let a), .level(let b)): .level(a &+ b)
            default: .real(left.double + right.double)
            }
        }
    }

    /// A `LatencyHistogram`'s buckets, sum and count.
    public struct Histogram: Sendable, Equatable {
        /// Upper bounds in nanoseconds, ascending; the +Inf bucket follows them.
        public private(set) var boundsNs: [UInt64]
        /// Cumulative counts, one per bound and then +Inf (the count).
        public private(set) var cumulativeCounts: [UInt64]
        public private(set) var sumNs: UInt64

        public var count: UInt64 { cumulativeCounts[cumulativeCounts.count - 1] }

        /// Nil unless the bounds ascend and the counts are one more than the bounds and
        /// never decrease: what the text format requires of a histogram.
        public init?(boundsNs: [UInt64], cumulativeCounts: [UInt64], sumNs: UInt64) {
            guard cumulativeCounts.count == boundsNs.count + 1,
                  zip(boundsNs, boundsNs.dropFirst()).allSatisfy({ $0 < $1 }),
                  zip(cumulativeCounts, cumulativeCounts.dropFirst()).allSatisfy({ $0 <= $1 })
            else { return nil }
            self.boundsNs = boundsNs
            self.cumulativeCounts = cumulativeCounts
            self.sumNs = sumNs
        }

        init(_ histogram: LatencyHistogram) {
            boundsNs = histogram.boundsNs
            cumulativeCounts = histogram.cumulativeCounts
            sumNs = histogram.sumNs
        }

        /// The sum of two histograms with the same bounds; nil for different bounds,
        /// which cannot be added bucket by bucket.
        public func adding(_ other: Histogram) -> Histogram? {
            guard boundsNs == other.boundsNs else { return nil }
            var sum = self
            for index in sum.cumulativeCounts.indices { sum.cumulativeCounts[index] &+= other.cumulativeCounts[index] }
            sum.sumNs &+= other.sumNs
            return sum
        }
    }

    /// In the order registered.
    public var families: [Family]

    public init(families: [Family]) {
        self.families = families
    }

    /// The family of this name, if any.
    public func family(_ name: String) -> Family? {
        families.first { $0.name == name }
    }

    /// The Prometheus text exposition format (`MetricsRegistry.contentType`), every
    /// family with its HELP and TYPE, in order.
    public func render() -> [UInt8] {
        var out = PrometheusText()
        for family in families {
            out.header(family.name, help: family.help, kind: family.kind)
            for series in family.series {
                switch series.sample {
                case .value(.count(let count)):
                    out.sample(family.name, labels: series.labels, value: count)
                case .value(.level(let level)):
                    out.sample(family.name, labels: series.labels, value: level)
                case .value(.real(let real)):
                    out.sample(family.name, labels: series.labels, value: real)
                case .histogram(let histogram):
                    out.histogram(family.name, labels: series.labels, histogram)
                }
            }
        }
        return out.bytes
    }

    /// `render()` as a string.
    public var text: String { String(decoding: render(), as: UTF8.self) }
}
