import PushClock
import PushSession
import PushWire

/// `connections`: opens `--connections` device connections to the gateway (HELLO with a
/// registration, like real devices), holds them idle for `--duration` seconds, answering
/// the gateway's PINGs, and reports the gateway process's resident memory per connection
/// from /proc/PID/status VmRSS before and after. Throughput is connections established
/// per second; latency is connect + HELLO -> HELLO_OK per connection.
enum ConnectionsBenchmark {
    static func run(_ session: BenchSession, _ shape: LoadShape) throws(BenchError) -> BenchReport {
        guard let gateway = session.target.gateway else { throw .setup("no gateway to benchmark") }
        guard let pid = session.target.gatewayPID else {
            throw .setup("cannot find the gateway's process to read its memory; pass --gateway-pid")
        }
        let holdSeconds: Double = switch shape.stop {
        case .duration(let seconds): seconds
        case .count: 0
        }
        let before = try ProcessMemory.residentBytes(pid: pid)
        let idle = IdleDevices()
        // One tag each, as a typical registration has: the gateway indexes it.
        let links = (0..<shape.connections).map {
            session.deviceGatewayLink(index: $0, device: "bench-conn-\($0)", tags: ["bench-idle"], owner: idle)
        }
        let started = Clocks.monotonicNanoseconds()
        let connector = try session.connect(links, to: gateway, phase: "opening connections", tolerateFailures: true)
        let seconds = Double(Clocks.monotonicNanoseconds() - started) / 1e9
        session.progress.status = { "holding \(connector.ready) connections" }
        try session.driver.idle(seconds: holdSeconds)
        let after = try ProcessMemory.residentBytes(pid: pid)

        var latency = makeLatencyHistogram()
        for link in links where link.isReady {
            _ = latency.record(min(max(link.handshakeNanos / 1_000, 1), latency.highestTrackableValue))
        }
        let held = links.filter(\.isReady).count
        var report = BenchReport(scenario: Scenario.connections.rawValue,
                                 parameters: [("gateway", .text(gateway.description)), ("connections", .integer(shape.connections)),
                                              ("hold_s", .number(holdSeconds))],
                                 operations: UInt64(connector.ready), seconds: seconds, latency: latency)
        report.errors = connector.failures
        if held < connector.ready { report.errors["closed while held", default: 0] += UInt64(connector.ready - held) }
        report.extra = [("bytes_per_connection", held > 0 ? Double(after - before) / Double(held) : 0),
                        ("connections_held", Double(held)),
                        ("rss_before_kib", Double(before / 1024)), ("rss_after_kib", Double(after / 1024))]
        return report
    }
}

/// Idle devices: the link answers PINGs itself, and a link that closes is counted when
/// the memory is read (it is no longer ready then).
final class IdleDevices: LinkOwner {
    func frame(on link: BenchLink, header: FrameHeader, body: UnsafeRawBufferPointer) {}
    func linkLost(_ link: BenchLink) {}
}
