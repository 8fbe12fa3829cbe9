import PushService
import PushTestSupport
import Testing

/// What one shard registers: the same families and labels on every loop, as the gateway's
/// shards build them. Process-wide families are added to shard 0's only.
private struct ShardMetrics {
    let registry = MetricsRegistry()
    let requests: MetricCounter
    let open: MetricGauge
    let latency: LatencyHistogram

    init(statuses: [(String, Double)], ratio: Double, buildInfo: Bool = false) {
        requests = registry.counter("shard_requests_total", help: "Requests.", labels: [("type", "push")])
        open = registry.gauge("shard_open", help: "Open connections.")
        latency = registry.histogram("shard_latency_seconds", help: "Latency.", labels: [("type", "push")],
                                     boundsNs: [1_000, 1_000_000])
        registry.gauge("shard_ratio", help: "A share.") { ratio }
        registry.family("shard_by_status_total", help: "By status.", kind: .counter) {
            statuses.map { ([("status", $0.0)], $0.1) }
        }
        if buildInfo { registry.addBuildInfo(version: "9.9.9") }
    }
}

@Suite("Metrics snapshots and merging across loops", .ownThread)
struct MetricsSnapshotTests {
    @Test("a registry renders exactly what it always rendered: escapes, exact integers past 2^53, negative gauges, histograms")
    func renderIsUnchanged() {
        let registry = MetricsRegistry()
        let big = registry.counter("big_total", help: "Big.\nTwo lines, one \\ backslash.", labels: [("q", "a\"b\\c\nd")])
        big.increment(by: Int64.max)
        let gauge = registry.gauge("level", help: "Level.")
        gauge.decrement()
        gauge.decrement()
        let histogram = registry.histogram("wait_seconds", help: "Wait.", boundsNs: [50_000, 2_500_000_000])
        histogram.observe(nanoseconds: 1)
        histogram.observe(nanoseconds: 3_000_000_000)
        registry.gauge("fraction", help: "Fraction.") { 0.125 }
        registry.family("by_total", help: "By.", kind: .counter, labels: [("fixed", "x")]) { [([("status", "ok")], 2)] }
        registry.family("none_total", help: "None.", kind: .counter) { [] }
        let expected = """
            # HELP big_total Big.\\nTwo lines, one \\\\ backslash.
            # TYPE big_total counter
            big_total{q="a\\"b\\\\c\\nd"} 9223372036854775807
            # HELP level Level.
            # TYPE level gauge
            level -2
            # HELP wait_seconds Wait.
            # TYPE wait_seconds histogram
            wait_seconds_bucket{le="0.00005"} 1
            wait_seconds_bucket{le="2.5"} 1
            wait_seconds_bucket{le="+Inf"} 2
            wait_seconds_sum 3.000000001
            wait_seconds_count 2
            # HELP fraction Fraction.
            # TYPE fraction gauge
            fraction 0.125
            # HELP by_total By.
            # TYPE by_total counter
            by_total{fixed="x",status="ok"} 2
            # HELP none_total None.
            # TYPE none_total counter

            """
        #expect(registry.text == expected)
        #expect(registry.snapshot().render() == registry.render())
    }

    @Test("a snapshot reads the collect closures and hooks when taken and keeps those values afterwards")
    func snapshotIsAMoment() {
        let registry = MetricsRegistry()
        let counter = registry.counter("c_total", help: "C.")
        var reads = 0
        var hooks = 0
        registry.beforeCollect { hooks += 1 }
        registry.gauge("reads", help: "Reads.") { reads += 1; return Double(reads) }
        counter.increment()
        let snapshot = registry.snapshot()
        counter.increment(by: 10)
        #expect(hooks == 1 && reads == 1)
        #expect(snapshot.family("c_total")?.series.first?.sample == .value(.count(1)))
        #expect(snapshot.family("reads")?.series.first?.sample == .value(.real(1)))
        #expect(snapshot.text == "# HELP c_total C.\n# TYPE c_total counter\nc_total 1\n# HELP reads Reads.\n# TYPE reads gauge\nreads 1\n")
        _ = registry.render()
        #expect(hooks == 2 && reads == 2, "a render is a snapshot too")
    }

    @Test("merging sums counters, gauges and histograms by labels and passes through what only one loop has")
    func mergeSums() throws {
        let zero = ShardMetrics(statuses: [("ok", 3), ("gone", 1)], ratio: 0.25, buildInfo: true)
        let one = ShardMetrics(statuses: [("ok", 4), ("late", 2)], ratio: 0.5)
        zero.requests.increment(by: 5)
        one.requests.increment(by: 7)
        zero.open.set(2)
        one.open.set(3)
        for nanoseconds: UInt64 in [500, 2_000] { zero.latency.observe(nanoseconds: nanoseconds) }
        for nanoseconds: UInt64 in [600, 5_000_000] { one.latency.observe(nanoseconds: nanoseconds) }

        let merged = MetricsSnapshot.merged([zero.registry.snapshot(), one.registry.snapshot()])
        let parsed = try MetricsExposition(parsing: merged.text)
        #expect(parsed.value("shard_requests_total", ["type": "push"]) == 12)
        #expect(parsed.value("shard_open") == 5)
        #expect(parsed.value("shard_ratio") == 0.75)
        #expect(parsed.value("shard_by_status_total", ["status": "ok"]) == 7)
        #expect(parsed.value("shard_by_status_total", ["status": "gone"]) == 1, "only on shard 0")
        #expect(parsed.value("shard_by_status_total", ["status": "late"]) == 2, "only on shard 1")
        #expect(parsed.value("shard_latency_seconds_bucket", ["type": "push", "le": "0.000001"]) == 2)
        #expect(parsed.value("shard_latency_seconds_bucket", ["type": "push", "le": "0.001"]) == 3)
        #expect(parsed.value("shard_latency_seconds_bucket", ["type": "push", "le": "+Inf"]) == 4)
        #expect(parsed.histogramCount("shard_latency_seconds", ["type": "push"]) == 4)
        #expect(parsed.value("shard_latency_seconds_sum", ["type": "push"]) == 0.005003100)
        #expect(parsed.value("securepush_build_info", ["version": "9.9.9"]) == 1, "once, from shard 0")
        #expect(parsed.families.map(\.name) == zero.registry.snapshot().families.map(\.name), "shard 0's order")
        #expect(parsed.family("shard_by_status_total")?.samples.map { $0.labels["status"] ?? "" } == ["ok", "gone", "late"])

        // A family only the second snapshot has comes after the first's.
        let extra = MetricsRegistry()
        extra.counter("extra_total", help: "Extra.") { 1 }
        extra.counter("shard_requests_total", help: "Requests.", labels: [("type", "push")]) { 1 }
        let more = MetricsSnapshot.merged([one.registry.snapshot(), extra.snapshot()])
        #expect(more.families.map(\.name).last == "extra_total")
        #expect(more.family("shard_requests_total")?.series.first?.sample == .value(.real(8)), "a counter plus a collected value")
    }

    @Test("what cannot be added is skipped, not trapped on: another kind or help, other histogram bounds")
    func mergeMismatches() throws {
        let first = MetricsRegistry()
        first.counter("x_total", help: "X.") { 1 }
        first.gauge("y_total", help: "Y.") { 1 }
        first.histogram("h_seconds", help: "H.", boundsNs: [1_000]).observe(nanoseconds: 1)
        let second = MetricsRegistry()
        second.counter("x_total", help: "Another X.") { 10 }
        second.family("y_total", help: "Y.", kind: .counter) { [([], 10)] }
        second.histogram("h_seconds", help: "H.", boundsNs: [2_000]).observe(nanoseconds: 1)
        let merged = MetricsSnapshot.merged([first.snapshot(), second.snapshot()])
        let parsed = try MetricsExposition(parsing: merged.text)
        #expect(parsed.value("x_total") == 1)
        #expect(parsed.family("x_total")?.help == "X.")
        #expect(parsed.value("y_total") == 1)
        #expect(parsed.family("y_total")?.type == "gauge")
        #expect(parsed.histogramCount("h_seconds") == 1)
        #expect(parsed.value("h_seconds_bucket", ["le": "0.000001"]) == 1)
        #expect(parsed.value("h_seconds_bucket", ["le": "0.000002"]) == nil)
    }

    @Test("a hand-made histogram must have one count per bound plus +Inf, never decreasing")
    func histogramValidation() throws {
        #expect(MetricsSnapshot.Histogram(boundsNs: [1], cumulativeCounts: [1], sumNs: 0) == nil)
        #expect(MetricsSnapshot.Histogram(boundsNs: [1, 2], cumulativeCounts: [2, 1, 3], sumNs: 0) == nil)
        #expect(MetricsSnapshot.Histogram(boundsNs: [2, 1], cumulativeCounts: [0, 0, 0], sumNs: 0) == nil)
        let histogram = try #require(MetricsSnapshot.Histogram(boundsNs: [1_000], cumulativeCounts: [1, 3], sumNs: 1_500))
        #expect(histogram.count == 3)
        let snapshot = MetricsSnapshot(families: [
            .init(name: "h_seconds", help: "H.", kind: .histogram, series: [.init(labels: [("a", "b")], sample: .histogram(histogram))]),
        ])
        #expect(snapshot.text.contains("h_seconds_bucket{a=\"b\",le=\"0.000001\"} 1\nh_seconds_bucket{a=\"b\",le=\"+Inf\"} 3\n"))
        #expect(snapshot.merging(snapshot).family("h_seconds")?.series.first?.sample
            == .histogram(try #require(MetricsSnapshot.Histogram(boundsNs: [1_000], cumulativeCounts: [2, 6], sumNs: 3_000))))
    }
}
