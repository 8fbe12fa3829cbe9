import PushClock
import PushSession

/// A service's counters, gauges and latency histograms, rendered in the Prometheus text
/// exposition format (version 0.0.4) when scraped, every family with its HELP and TYPE.
///
/// Loop-confined: the service updates its metrics on its loop thread and the scrape runs
/// there too (`MonitoringEndpoint`), so a counter is a plain integer and a histogram a
/// plain bucket array, with no lock, atomic or allocation per update. Values a service
/// already keeps (open connections, refusals) are read at scrape time through closures
/// instead of being counted twice.
///
/// A process with several loops keeps one registry per loop; the loop serving /metrics
/// gathers the others' `snapshot()`s, each taken on its own loop (`MetricsSource`), and
/// renders their merge (`MetricsSnapshot.merged(_:)`), so no update ever crosses threads.
///
/// Names and labels are the programmer's, not a peer's: an invalid name, a counter not
/// ending in `_total` or one name registered with two kinds or two help texts is a
/// programming error and traps.
public final class MetricsRegistry {
    public enum Kind: String, Sendable {
        case counter, gauge, histogram
    }

    /// A label set, as (name, value) pairs in the order rendered.
    public typealias Labels = [(String, String)]

    private enum Source {
        case counter(MetricCounter)
        case gauge(MetricGauge)
        case histogram(LatencyHistogram)
        /// A value read at scrape time.
        case value(() -> Double)
        /// Any number of series read at scrape time (labels beyond the family's fixed ones).
        case series(() -> [(Labels, Double)])
    }

    private struct Series {
        /// Rendered `name="value"` pairs, comma-separated, without braces; "" for none.
        var labels: String
        var source: Source
    }

    private struct Family {
        var name: String
        var help: String
        var kind: Kind
        var series: [Series]
    }

    private var families: [Family] = []
    private var familyIndex: [String: Int] = [:]
    private var collectHooks: [() -> Void] = []

    public init() {}

    // MARK: registering

    /// A counter the service increments.
    public func counter(_ name: String, help: String, labels: Labels = []) -> MetricCounter {
        let counter = MetricCounter()
        add(name, help: help, kind: .counter, labels: labels, source: .counter(counter))
        return counter
    }

    /// A counter whose value the service already keeps, read at scrape time.
    public func counter(_ name: String, help: String, labels: Labels = [], collect: @escaping () -> Double) {
        add(name, help: help, kind: .counter, labels: labels, source: .value(collect))
    }

    /// A gauge the service sets, increments or decrements.
    public func gauge(_ name: String, help: String, labels: Labels = []) -> MetricGauge {
        let gauge = MetricGauge()
        add(name, help: help, kind: .gauge, labels: labels, source: .gauge(gauge))
        return gauge
    }

    /// A gauge read at scrape time.
    public func gauge(_ name: String, help: String, labels: Labels = [], collect: @escaping () -> Double) {
        add(name, help: help, kind: .gauge, labels: labels, source: .value(collect))
    }

    /// Series whose label sets are known only at scrape time (counts by a status the
    /// service has seen, say); each entry's labels follow `labels`.
    public func family(_ name: String, help: String, kind: Kind, labels: Labels = [],
                       collect: @escaping () -> [(Labels, Double)]) {
        precondition(kind != .histogram, "a histogram family is registered with histogram(_:help:labels:boundsNs:)")
        add(name, help: help, kind: kind, labels: labels, source: .series(collect))
    }

    /// A latency histogram; `boundsNs` are the buckets' upper bounds in nanoseconds,
    /// rendered as `le` in seconds.
    public func histogram(_ name: String, help: String, labels: Labels = [],
                          boundsNs: [UInt64] = LatencyHistogram.defaultBoundsNs) -> LatencyHistogram {
        let histogram = LatencyHistogram(boundsNs: boundsNs)
        add(name, help: help, kind: .histogram, labels: labels, source: .histogram(histogram))
        return histogram
    }

    /// Runs before every scrape, before any value is read: one read of /proc for several
    /// gauges, say.
    public func beforeCollect(_ hook: @escaping () -> Void) {
        collectHooks.append(hook)
    }

    /// Whether a family of this name is registered.
    public func contains(_ name: String) -> Bool { familyIndex[name] != nil }

    private func add(_ name: String, help: String, kind: Kind, labels: Labels, source: Source) {
        precondition(PrometheusText.isMetricName(name), "invalid metric name \(name)")
        precondition(kind != .counter || name.hasSuffix("_total"), "counter \(name) must end in _total")
        precondition(!help.isEmpty, "metric \(name) needs help text")
        for (label, _) in labels {
            precondition(PrometheusText.isLabelName(label) && label != "le", "invalid label name \(label) on \(name)")
        }
        let series = Series(labels: PrometheusText.labels(labels), source: source)
        if let index = familyIndex[name] {
            precondition(families[index].kind == kind && families[index].help == help,
                         "metric \(name) registered twice with different kinds or help")
            precondition(!families[index].series.contains { $0.labels == series.labels }, "metric \(name) registered twice with one label set")
            families[index].series.append(series)
        } else {
            familyIndex[name] = families.count
            families.append(Family(name: name, help: help, kind: kind, series: [series]))
        }
    }

    // MARK: rendering

    /// The content type of `render()`.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// Every family, in the order registered.
    public func render() -> [UInt8] {
        snapshot().render()
    }

    /// Every family's values now, after the `beforeCollect` hooks, with the closures
    /// registered for scrape-time values read once each. Taken on the registry's loop
    /// like any other use; the result may cross threads (see `MetricsSource`).
    public func snapshot() -> MetricsSnapshot {
        for hook in collectHooks { hook() }
        return MetricsSnapshot(families: families.map { family in
            var series: [MetricsSnapshot.Series] = []
            series.reserveCapacity(family.series.count)
            for one in family.series {
                switch one.source {
                case .counter(let counter):
                    series.append(MetricsSnapshot.Series(labels: one.labels, sample: .value(.count(counter.value))))
                case .gauge(let gauge):
                    series.append(MetricsSnapshot.Series(labels: one.labels, sample: .value(.level(gauge.value))))
                case .value(let read):
                    series.append(MetricsSnapshot.Series(labels: one.labels, sample: .value(.real(read()))))
                case .series(let read):
                    for (extra, value) in read() {
                        let labels = [one.labels, PrometheusText.labels(extra)].filter { !$0.isEmpty }.joined(separator: ",")
                        series.append(MetricsSnapshot.Series(labels: labels, sample: .value(.real(value))))
                    }
                case .histogram(let histogram):
                    series.append(MetricsSnapshot.Series(labels: one.labels, sample: .histogram(MetricsSnapshot.Histogram(histogram))))
                }
            }
            return MetricsSnapshot.Family(name: family.name, help: family.help, kind: family.kind, series: series)
        })
    }

    /// `render()` as a string.
    public var text: String { String(decoding: render(), as: UTF8.self) }
}

/// A monotonically increasing count. Loop-confined (see `MetricsRegistry`).
public final class MetricCounter {
    // Touched on the hot path by one thread only, so no dynamic exclusivity check: without
    // it a push through the gateway pays four (one per counter it bumps), 304 instructions of
    // 11.2k, 2.7 % (callgrind, gateway under `bench push --devices 1000`, release build).
    @exclusivity(unchecked) public private(set) var value: UInt64 = 0

    init() {}

    public func increment() { value &+= 1 }

    public func increment(by amount: Int) {
        if amount > 0 { value &+= UInt64(amount) }
    }

    public func increment(by amount: Int64) {
        if amount > 0 { value &+= UInt64(amount) }
    }
}

/// A value that goes up and down. Loop-confined (see `MetricsRegistry`).
public final class MetricGauge {
    public private(set) var value: Int64 = 0

    init() {}

    public func increment() { value &+= 1 }
    public func decrement() { value &-= 1 }
    public func set(_ newValue: Int) { value = Int64(newValue) }
}

/// Latencies counted into fixed buckets, as a Prometheus histogram (cumulative counts
/// per upper bound, a sum and a count). Observing costs a short scan of the bounds and
/// two additions. Loop-confined (see `MetricsRegistry`).
public final class LatencyHistogram {
    /// 50 us to 10 s: loopback round trips at the bottom, an fsync or a slow disk in the
    /// middle, a password hash or a stalled writer at the top.
    public static let defaultBoundsNs: [UInt64] = [
        50_000, 100_000, 250_000, 500_000,
        1_000_000, 2_500_000, 5_000_000, 10_000_000, 25_000_000, 50_000_000,
        100_000_000, 250_000_000, 500_000_000,
        1_000_000_000, 2_500_000_000, 5_000_000_000, 10_000_000_000,
    ]

    /// Upper bounds in nanoseconds, ascending; the +Inf bucket follows them.
    public let boundsNs: [UInt64]
    // Fixed-size buffers allocated once: an observation touches no reference count and
    // no copy-on-write check.
    private let bounds: UnsafeMutableBufferPointer<UInt64>
    /// Per bucket, not cumulative; one more than `boundsNs` (+Inf).
    private let counts: UnsafeMutableBufferPointer<UInt64>
    /// No dynamic exclusivity check (loop-confined): without it a push through the gateway
    /// pays two (one per histogram it observes), 152 instructions of 11.2k, 1.4 % (measured
    /// as `MetricCounter.value` is).
    @exclusivity(unchecked) public private(set) var sumNs: UInt64 = 0

    init(boundsNs: [UInt64]) {
        precondition(!boundsNs.isEmpty && zip(boundsNs, boundsNs.dropFirst()).allSatisfy { $0 < $1 },
                     "histogram bounds must be ascending")
        self.boundsNs = boundsNs
        bounds = .allocate(capacity: boundsNs.count)
        _ = bounds.initialize(from: boundsNs)
        counts = .allocate(capacity: boundsNs.count + 1)
        counts.initialize(repeating: 0)
    }

    deinit {
        bounds.deallocate()
        counts.deallocate()
    }

    public func observe(nanoseconds: UInt64) {
        var index = 0
        while index < bounds.count, nanoseconds > bounds[index] { index += 1 }
        counts[index] &+= 1
        sumNs &+= nanoseconds
    }

    /// Observes the time from `startNs` (a `Clocks.monotonicNanoseconds()` reading) to now.
    public func observe(since startNs: UInt64) {
        let now = Clocks.monotonicNanoseconds()
        observe(nanoseconds: now >= startNs ? now - startNs : 0)
    }

    /// Observations so far.
    public var count: UInt64 { counts.reduce(0, &+) }

    /// Cumulative counts, one per bound and then +Inf.
    public var cumulativeCounts: [UInt64] {
        var running: UInt64 = 0
        return counts.map { running &+= $0; return running }
    }
}
