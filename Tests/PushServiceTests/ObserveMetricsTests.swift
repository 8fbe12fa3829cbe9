import Foundation
import PushService
import PushTestSupport
import Testing

/// A registry with one of everything a service registers.
private func sampleRegistry() -> (MetricsRegistry, MetricCounter, MetricGauge, LatencyHistogram) {
    let registry = MetricsRegistry()
    let counter = registry.counter("demo_requests_total", help: "Requests.\nSecond line with a \\ backslash.",
                                   labels: [("type", "say \"hi\"\\ok\n")])
    let gauge = registry.gauge("demo_open", help: "Open things.")
    let histogram = registry.histogram("demo_duration_seconds", help: "How long.", labels: [("type", "store")],
                                       boundsNs: [1_000, 1_000_000, 2_500_000_000])
    registry.counter("demo_collected_total", help: "Counted elsewhere.") { 7 }
    registry.gauge("demo_ratio", help: "A fraction.") { 0.25 }
    registry.family("demo_by_status_total", help: "By status.", kind: .counter) { [([("status", "ok")], 3), ([("status", "gone")], 1)] }
    registry.family("demo_empty_total", help: "Nothing seen yet.", kind: .counter) { [] }
    registry.addBuildInfo(version: "1.2.3 (protocol 1)")
    registry.addProcessMetrics()
    return (registry, counter, gauge, histogram)
}

@Suite("Metrics registry and Prometheus text", .ownThread)
struct ObserveMetricsTests {
    @Test("what a service counts reads back through a strict text-format parser, HELP and TYPE on every family")
    func roundTrip() throws {
        let (registry, counter, gauge, histogram) = sampleRegistry()
        counter.increment()
        counter.increment(by: 4)
        gauge.increment()
        gauge.increment()
        gauge.decrement()
        for nanoseconds: UInt64 in [500, 1_000, 1_001, 3_000_000_000] { histogram.observe(nanoseconds: nanoseconds) }
        let text = registry.text
        let parsed = try MetricsExposition(parsing: text)
        for family in parsed.families {
            #expect(!(family.help ?? "").isEmpty, "\(family.name) has no HELP")
            #expect(family.type != nil)
        }
        #expect(parsed.family("demo_requests_total")?.help == "Requests.\nSecond line with a \\ backslash.")
        #expect(parsed.value("demo_requests_total", ["type": "say \"hi\"\\ok\n"]) == 5)
        #expect(parsed.value("demo_open") == 1)
        #expect(parsed.value("demo_collected_total") == 7)
        #expect(parsed.value("demo_ratio") == 0.25)
        #expect(parsed.value("demo_by_status_total", ["status": "gone"]) == 1)
        #expect(parsed.family("demo_empty_total")?.samples.isEmpty == true)
        #expect(parsed.value("securepush_build_info", ["version": "1.2.3 (protocol 1)"]) == 1)
        // Buckets are cumulative and `le` is in seconds: 500 ns and 1 us are <= 1 us.
        #expect(parsed.value("demo_duration_seconds_bucket", ["type": "store", "le": "0.000001"]) == 2)
        #expect(parsed.value("demo_duration_seconds_bucket", ["type": "store", "le": "0.001"]) == 3)
        #expect(parsed.value("demo_duration_seconds_bucket", ["type": "store", "le": "2.5"]) == 3)
        #expect(parsed.value("demo_duration_seconds_bucket", ["type": "store", "le": "+Inf"]) == 4)
        #expect(parsed.histogramCount("demo_duration_seconds", ["type": "store"]) == 4)
        #expect(parsed.value("demo_duration_seconds_sum", ["type": "store"]) == 3.000002501)
    }

    @Test("the process metrics describe this process")
    func processMetrics() throws {
        let parsed = try MetricsExposition(parsing: sampleRegistry().0.text)
        let now = Date().timeIntervalSince1970
        let started = try #require(parsed.value("process_start_time_seconds"))
        #expect(started <= now + 1 && started > now - 86_400 * 7, "started \(started), now \(now)")
        #expect(try #require(parsed.value("process_resident_memory_bytes")) > 1_000_000)
        #expect(try #require(parsed.value("process_virtual_memory_bytes")) >= parsed.value("process_resident_memory_bytes") ?? 0)
        let open = try #require(parsed.value("process_open_fds"))
        #expect(open >= 3 && open <= (parsed.value("process_max_fds") ?? 0))
        #expect(try #require(parsed.value("process_cpu_seconds_total")) > 0)
        #expect(parsed.family("process_cpu_seconds_total")?.type == "counter")
    }

    @Test("the strict parser refuses what the format forbids")
    func parserIsStrict() {
        let refused = [
            "x_total 1\n",                                                  // no HELP or TYPE
            "# HELP x h\n# TYPE x gauge\nx 1",                              // no final newline
            "# HELP x h\n# TYPE x gauge\nx{a=\"1\"} 1\nx{a=\"1\"} 2\n",     // a repeated series
            "# HELP x h\n# TYPE x gauge\nx{a=\"\\q\"} 1\n",                 // a bad escape
            "# HELP x_total h\n# TYPE x_total counter\nx_total -1\n",       // a negative counter
            "# HELP x h\n# TYPE x gauge\n# HELP y h\n# TYPE y gauge\nx 1\n", // x's sample after y's header
            "# HELP h h\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
            "# HELP h h\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n", // no +Inf
            "# HELP x h\n# TYPE x gauge\nx inf\n",
        ]
        for text in refused {
            #expect(throws: MetricsExposition.Failure.self, "\(text.debugDescription)") { try MetricsExposition(parsing: text) }
        }
    }

    @Test("le and sums are exact decimal seconds")
    func seconds() throws {
        let registry = MetricsRegistry()
        let histogram = registry.histogram("t_seconds", help: "t", boundsNs: [50_000, 2_500_000_000, 10_000_000_000])
        histogram.observe(nanoseconds: 123_456_789)
        let text = registry.text
        #expect(text.contains("t_seconds_bucket{le=\"0.00005\"} 0\n"))
        #expect(text.contains("t_seconds_bucket{le=\"2.5\"} 1\n"))
        #expect(text.contains("t_seconds_bucket{le=\"10\"} 1\n"))
        #expect(text.contains("t_seconds_sum 0.123456789\n"))
    }

    @Test("promtool check metrics finds nothing to complain about", .enabled(if: PrometheusTools.promtool != nil))
    func promtoolClean() throws {
        let (registry, counter, _, histogram) = sampleRegistry()
        counter.increment()
        histogram.observe(nanoseconds: 42)
        #expect(try PrometheusTools.promtoolProblems(registry.text) == nil)
    }

    @Test("the official Python client's parser reads every family", .enabled(if: PrometheusTools.pythonWithClient != nil))
    func pythonParses() throws {
        let (registry, _, _, histogram) = sampleRegistry()
        histogram.observe(nanoseconds: 42)
        let families = try PrometheusTools.pythonParse(registry.text)
        #expect(families.contains("demo_duration_seconds histogram 6"))
        #expect(families.contains { $0.hasPrefix("demo_requests counter") })
        #expect(families.contains { $0.hasPrefix("process_resident_memory_bytes gauge") })
    }
}
