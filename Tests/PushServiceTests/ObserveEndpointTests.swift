import Foundation
import Logging
import PushEventLoop
import PushService
import PushSession
import PushTestSupport
import PushWire
import Synchronization
import Testing

/// Readiness the test sets from its thread and the loop reads.
private final class ReadinessSwitch: Sendable {
    let value = Mutex(Readiness.ready)
}

/// A MonitoringEndpoint on its own loop thread whose readiness the test sets.
private final class RunningMonitor: Sendable {
    let thread: EventLoopThread
    let port: Int
    let readiness = ReadinessSwitch()

    init() throws {
        let bound = Mutex(0)
        let readiness = readiness
        thread = try EventLoopThread(name: "monitor-test") { loop in
            let registry = MetricsRegistry()
            registry.counter("up_checks_total", help: "Checks.") { 1 }
            let endpoint = try? MonitoringEndpoint(loop: loop, host: "127.0.0.1", port: 0, metrics: registry) {
                readiness.value.withLock { $0 }
            }
            bound.withLock { $0 = endpoint?.port ?? 0 }
        }
        port = bound.withLock { $0 }
    }

    deinit { thread.shutdown() }
}

@Suite("Monitoring endpoint, JSON logs and log throttling", .ownThread)
struct ObserveEndpointTests {
    @Test("/healthz is 200 while the loop runs; /readyz follows readiness with a one-line reason; /metrics is the text format")
    func endpoints() throws {
        let monitor = try RunningMonitor()
        #expect(monitor.port > 0)
        let health = try HTTPGet.fetch(port: monitor.port, path: "/healthz")
        #expect(health.status == 200 && health.body == "ok\n")
        #expect(try HTTPGet.fetch(port: monitor.port, path: "/readyz").status == 200)
        monitor.readiness.value.withLock { $0 = .notReady("draining: the test says so") }
        let unready = try HTTPGet.fetch(port: monitor.port, path: "/readyz")
        #expect(unready.status == 503)
        #expect(unready.body == "not ready: draining: the test says so\n")
        #expect(try HTTPGet.fetch(port: monitor.port, path: "/healthz").status == 200, "alive even when not ready")
        let metrics = try HTTPGet.fetch(port: monitor.port, path: "/metrics")
        #expect(metrics.headers.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8"))
        #expect(try MetricsExposition(parsing: metrics.body).value("up_checks_total") == 1)
        #expect(try HTTPGet.fetch(port: monitor.port, path: "/other").status == 404)
    }

    @Test("a JSON log line is one object with an ISO-8601 local timestamp, level, label, message and nested metadata")
    func jsonLine() throws {
        let lines = Mutex<[String]>([])
        var logger = Logger(label: "securepush.test") { JSONLogHandler(label: $0) { line in lines.withLock { $0.append(line) } } }
        logger.logLevel = .info
        logger[metadataKey: "service"] = "store"
        logger.debug("not written")
        logger.info("login failed", metadata: ["user": "al\"ice\n", "peer": "127.0.0.1",
                                               "nested": .dictionary(["list": .array(["a", .stringConvertible(7)])])])
        let written = lines.withLock { $0 }
        try #require(written.count == 1)
        let line = written[0]
        #expect(line.hasSuffix("}\n") && line.filter { $0 == "\n" }.count == 1, "one line: \(line)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["level"] as? String == "info")
        #expect(object["label"] as? String == "securepush.test")
        #expect(object["message"] as? String == "login failed")
        let metadata = try #require(object["metadata"] as? [String: Any])
        #expect(metadata["user"] as? String == "al\"ice\n")
        #expect(metadata["service"] as? String == "store")
        #expect((metadata["nested"] as? [String: Any])?["list"] as? [String] == ["a", "7"])
        let timestamp = try #require(object["timestamp"] as? String)
        #expect(timestamp.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d/) != nil, "\(timestamp)")
        let parsed = try #require(ISO8601DateFormatter.withFractionalSeconds.date(from: timestamp))
        #expect(abs(parsed.timeIntervalSinceNow) < 60)
    }

    @Test("a throttled log line reports at once, then once per interval with the count held back")
    func throttle() {
        var throttle = LogThrottle(intervalMs: 1_000)
        #expect(throttle.event(nowMs: 0) == 1)
        #expect(throttle.event(nowMs: 10) == nil)
        #expect(throttle.event(nowMs: 20) == nil)
        #expect(throttle.due(nowMs: 500) == nil)
        #expect(throttle.due(nowMs: 1_000) == 2)
        #expect(throttle.due(nowMs: 5_000) == nil, "nothing held back")
        #expect(throttle.event(nowMs: 5_001) == 1)
    }
}

extension ISO8601DateFormatter {
    fileprivate static var withFractionalSeconds: ISO8601DateFormatter {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }
}

/// A service that refuses every HELLO, saying why in the log only.
private final class RefuseAll: ServiceHandler {
    typealias PeerState = Int
    var host: ServiceHost<RefuseAll>!

    init(loop: EventLoop, logger: Logger) {
        host = ServiceHost(loop: loop, limits: ServiceLimits(name: "refuser", served: [.store]), logger: logger, handler: self)
    }

    func admit(_ hello: Hello, peer: ServicePeer<RefuseAll>) -> Admission<Int> {
        .refuse(.badCredentials, "no", logDetail: "signature does not verify")
    }

    func serve(_ message: Message, correlation: UInt32, peer: ServicePeer<RefuseAll>) {}
    func closed(_ peer: ServicePeer<RefuseAll>, reason: CloseReason) {}
}

extension ObserveEndpointTests {
    @Test("a refused HELLO is logged at info with the peer and the reason, and counted by status in the metrics")
    func helloRefusals() throws {
        let log = CapturedLog()
        let loop = try EventLoop()
        let service = RefuseAll(loop: loop, logger: log.logger(label: "refuser", level: .info))
        try service.host.listen(host: "127.0.0.1", port: 0, tls: nil)
        let registry = MetricsRegistry()
        service.host.registerMetrics(in: registry, prefix: "refuser")
        let client = RecordingClient(loop: loop, port: service.host.port ?? 0)
        #expect(loop.run(until: { client.connection != nil }))
        client.send(.hello(Hello(role: .provider)), correlation: 1)
        #expect(loop.run(until: { client.closed }))
        #expect(service.host.helloRefusals == [.badCredentials: 1])
        #expect(log.text.contains("info hello refused"), "\(log.text)")
        #expect(log.text.contains("peer=127.0.0.1") && log.text.contains("reason=signature does not verify")
                && log.text.contains("status=BAD_CREDENTIALS"), "\(log.text)")
        let parsed = try MetricsExposition(parsing: registry.text)
        #expect(parsed.value("refuser_hellos_refused_total", ["status": "bad_credentials"]) == 1)
        #expect(parsed.value("refuser_connections") == 0)
        #expect(parsed.value("refuser_connections_refused_total", ["reason": "handshake_timeout"]) == 0)
    }
}
