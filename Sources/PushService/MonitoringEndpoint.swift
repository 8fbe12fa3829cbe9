import PushEventLoop

/// Whether a service should be sent traffic now.
public enum Readiness: Equatable, Sendable {
    case ready
    /// With one line saying why, for the operator reading /readyz.
    case notReady(String)
}

/// A service's HTTP endpoint for operators and orchestrators, shared by the store and the
/// gateway. Loop-confined; it runs on the service's own loop, so what it reports is the
/// loop's view:
///
/// - `GET /metrics`: the service's `MetricsRegistry` in the Prometheus text format; with
///   `others`, merged with those loops' registries (see below).
/// - `GET /healthz`: 200 `ok` whenever the loop answers (liveness): a loop that is stuck
///   answers nothing, which is what a liveness probe needs to see.
/// - `GET /readyz`: 200 `ready` when the service is listening and willing to take traffic,
///   503 with a one-line reason otherwise (draining, disk not writable, ...).
///
/// Any other path is 404, any other method 405 (`Allow: GET`). Every answer carries
/// `Connection: close` and the connection closes after it: one request per connection.
/// It is served by `HTTPServer` (evhttp), whose own answers (400 for what it cannot parse
/// or a head over `limits.maxHeaderBytes`, 413 for a body over `limits.maxBodyBytes`, 503
/// over `maxConnections`; in plain text here) and request deadline apply; see there. Those
/// refusals are counted in `metrics` as `securepush_monitoring_refused_at_cap_total` and
/// `securepush_monitoring_deadline_closes_total`.
///
/// While listening, the endpoint's server is kept alive by the loop; `stop()` (or the
/// loop shutting down) ends that.
public final class MonitoringEndpoint {
    private var server: HTTPServer?

    /// The bound port (the real one when 0 was asked for); 0 once stopped.
    public var port: Int { server?.port ?? 0 }

    /// A scrape needs a short head and no body; a client that takes over 5 s to send its
    /// request is closed.
    public static let defaultLimits = HTTPServerLimits(maxHeaderBytes: 8 * 1024, maxBodyBytes: 4 * 1024,
                                                       requestDeadline: .seconds(5))
    /// Scrapers and probes open a connection or two at a time; the cap bounds what slow
    /// or hostile clients can hold (file descriptors, buffers) in the service's process.
    public static let defaultMaxConnections = 128

    /// Binds `host` (numeric) and `port` (0: any free port) on `loop` and starts answering.
    ///
    /// `others` are the registries of the process's other loops (shards built by the same
    /// code). A scrape asks each of their loops for a snapshot, takes `metrics`' own
    /// meanwhile, and waits up to `othersTimeout` for the answers, blocking this loop:
    /// scrapes are rare and a snapshot takes a loop microseconds. It cannot deadlock as
    /// long as those loops never wait on this one (they only take a snapshot when their
    /// turn comes); a loop that is stuck, busy past the timeout or shut down is left out
    /// of that scrape, and the rest is served. The answer is `MetricsSnapshot.merged`:
    /// series with the same labels summed, what only one loop registers passed through.
    public init(loop: EventLoop, host: String, port: Int, metrics: MetricsRegistry,
                others: [MetricsSource] = [], othersTimeout: Duration = .seconds(2),
                limits: HTTPServerLimits = MonitoringEndpoint.defaultLimits,
                maxConnections: Int = MonitoringEndpoint.defaultMaxConnections,
                readiness: @escaping () -> Readiness) throws(EventLoopError) {
        let pages = MonitoringPages(metrics: metrics, others: others, othersTimeout: othersTimeout,
                                    callingLoop: loop.handle, readiness: readiness)
        let server = try HTTPServer(loop: loop, host: host, port: port, tls: nil, limits: limits,
                                    gate: HTTPConnectionGate(maxConnections: maxConnections),
                                    errorPages: MonitoringEndpoint.errorPages) { request in
            pages.answer(request.method, request.path).send(to: request)
        }
        self.server = server
        // One endpoint per registry; a second one's refusals would go uncounted.
        if !metrics.contains(MonitoringEndpoint.refusedMetric) {
            metrics.watchRefusals(of: server, prefix: "securepush_monitoring", connections: "Monitoring endpoint",
                                  cap: "its connection cap")
        }
    }

    static let refusedMetric = "securepush_monitoring_refused_at_cap_total"

    /// The server's own answers (400, 413, 417, 503 at the cap) in plain text, like the pages'.
    static let errorPages = HTTPErrorPages(contentType: "text/plain; charset=utf-8") { status, reason, detail in
        Array((status == 503 ? "too many open connections, retry later\n" : (detail ?? reason.lowercased()) + "\n").utf8)
    }

    /// Stops listening and closes open connections. Idempotent.
    public func stop() {
        server?.stop()
        server = nil
    }
}
