import Dispatch
import Glibc
import PushEventLoop
import PushService
import PushTestSupport
import Synchronization
import Testing

/// A loop thread with one registry, as a gateway shard has, and the `MetricsSource` made
/// for it on that thread.
private final class Shard: Sendable {
    let thread: EventLoopThread
    let source: MetricsSource
    /// Owns the registry, as the shard's service would: the source holds it weakly.
    private let registry: LoopBound<MetricsRegistry>

    /// `requests` is the value of `shard_requests_total` on this shard.
    init(name: String, requests: Int, buildInfo: Bool = false) throws {
        let made = Mutex<(MetricsSource, LoopBound<MetricsRegistry>)?>(nil)
        thread = try EventLoopThread(name: name) { loop in
            let registry = MetricsRegistry()
            registry.counter("shard_requests_total", help: "Requests.").increment(by: requests)
            if buildInfo { registry.addBuildInfo(version: "9.9.9") }
            made.withLock { $0 = (MetricsSource(registry, loop: loop), LoopBound(registry, loop: loop)) }
        }
        let parts = try #require(made.withLock { $0 })
        (source, registry) = parts
    }

    // Stops the loop before the registry is released here.
    deinit { thread.shutdown() }
}

/// A MonitoringEndpoint on its own loop thread with its own registry and `others`.
private final class Monitor: Sendable {
    let thread: EventLoopThread
    let port: Int

    init(requests: Int, others: @escaping @Sendable (EventLoop, MetricsRegistry) -> [MetricsSource],
         timeout: Duration = .seconds(2)) throws {
        let bound = Mutex(0)
        thread = try EventLoopThread(name: "monitor-shard0") { loop in
            let registry = MetricsRegistry()
            registry.counter("shard_requests_total", help: "Requests.").increment(by: requests)
            registry.counter("local_only_total", help: "Only here.") { 1 }
            let endpoint = try? MonitoringEndpoint(loop: loop, host: "127.0.0.1", port: 0, metrics: registry,
                                                   others: others(loop, registry), othersTimeout: timeout) { .ready }
            bound.withLock { $0 = endpoint?.port ?? 0 }
        }
        port = bound.withLock { $0 }
        #expect(port > 0)
    }

    deinit { thread.shutdown() }

    /// GET /metrics, parsed, and how long it took.
    func scrape() throws -> (MetricsExposition, Duration) {
        let start = ContinuousClock.now
        let body = try HTTPGet.metrics(port: port)
        return (try MetricsExposition(parsing: body), ContinuousClock.now - start)
    }
}

@Suite("Serving several loops' metrics from one MonitoringEndpoint", .ownThread)
struct MetricsSourceEndpointTests {
    @Test("/metrics on loop A serves A's registry plus those of loops B and C, summed by series")
    func sumsOverLoops() throws {
        let b = try Shard(name: "shard-b", requests: 20, buildInfo: true)
        let c = try Shard(name: "shard-c", requests: 300)
        let sources = [b.source, c.source]
        let monitor = try Monitor(requests: 1) { _, _ in sources }
        for _ in 0..<3 {
            let (parsed, _) = try monitor.scrape()
            #expect(parsed.value("shard_requests_total") == 321)
            #expect(parsed.value("local_only_total") == 1)
            #expect(parsed.value("securepush_build_info", ["version": "9.9.9"]) == 1, "from shard B only")
            #expect(parsed.families.first?.name == "shard_requests_total", "the scraping loop's order first")
        }
    }

    @Test("a loop that does not answer in time is left out: the scrape answers after the timeout with the rest")
    func stuckLoopTimesOut() throws {
        let stuck = try Shard(name: "shard-stuck", requests: 20)
        let live = try Shard(name: "shard-live", requests: 300)
        let sources = [stuck.source, live.source]
        let release = DispatchSemaphore(value: 0)
        let blocking = stuck.thread.handle.execute {
            // Bounded: the loop comes back after 10 s even if the test fails first.
            _ = release.wait(timeout: .now() + 10)
        }
        #expect(blocking)
        var released = false
        defer { if !released { release.signal() } }
        let monitor = try Monitor(requests: 1, others: { _, _ in sources }, timeout: .milliseconds(300))
        let (parsed, took) = try monitor.scrape()
        #expect(parsed.value("shard_requests_total") == 301, "the stuck shard's 20 left out")
        #expect(took >= .milliseconds(250), "waited for the stuck loop: \(took)")
        #expect(took < .seconds(3), "but not much past the timeout: \(took)")

        release.signal()
        released = true
        // Once the loop is free again (its late answer to the first scrape is dropped),
        // it is counted.
        var recovered = false
        for _ in 0..<20 where !recovered {
            recovered = try monitor.scrape().0.value("shard_requests_total") == 321
        }
        #expect(recovered)
    }

    @Test("a loop that has shut down is left out at once, not after the timeout")
    func shutDownLoop() throws {
        let gone = try Shard(name: "shard-gone", requests: 20)
        let sources = [gone.source]
        gone.thread.shutdown()
        let monitor = try Monitor(requests: 1) { _, _ in sources }
        let (parsed, took) = try monitor.scrape()
        #expect(parsed.value("shard_requests_total") == 1)
        #expect(took < .seconds(1), "no wait on a loop that cannot answer: \(took)")
    }

    @Test("a source on the scraping loop itself is read directly instead of waiting for its own loop")
    func sameLoopSource() throws {
        let monitor = try Monitor(requests: 4) { loop, registry in [MetricsSource(registry, loop: loop)] }
        let (parsed, took) = try monitor.scrape()
        #expect(parsed.value("shard_requests_total") == 8)
        #expect(took < .seconds(1), "\(took)")
    }

    @Test("snapshots(of:timeout:) from a plain thread gathers each loop's snapshot in order")
    func gatherFromThread() throws {
        let b = try Shard(name: "shard-b", requests: 20)
        let c = try Shard(name: "shard-c", requests: 300)
        let snapshots = MetricsSource.snapshots(of: [b.source, c.source], timeout: .seconds(2))
        #expect(snapshots.map { $0.family("shard_requests_total")?.series.first?.sample } == [.value(.count(20)), .value(.count(300))])
    }

    @Test("a source does not keep its registry alive: once the loop's owner drops it, the loop answers with nothing")
    func registryGone() throws {
        let made = Mutex<MetricsSource?>(nil)
        let thread = try EventLoopThread(name: "shard-dropped") { loop in
            let registry = MetricsRegistry()
            registry.counter("shard_requests_total", help: "Requests.").increment(by: 20)
            made.withLock { $0 = MetricsSource(registry, loop: loop) }
        }
        defer { thread.shutdown() }
        let source = try #require(made.withLock { $0 })
        let start = ContinuousClock.now
        #expect(MetricsSource.snapshots(of: [source], timeout: .seconds(2)).isEmpty)
        #expect(ContinuousClock.now - start < .seconds(1), "answered, not timed out")
    }
}
