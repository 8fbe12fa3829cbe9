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
public final class MonitoringEndpoint {
    private var endpoint: HTTPEndpoint?

    /// The bound port (the real one when 0 was asked for); 0 once stopped.
    public var port: Int { endpoint?.port ?? 0 }

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
                readiness: @escaping () -> Readiness) throws(EventLoopError) {
        let handle = loop.handle
        endpoint = try HTTPEndpoint(loop: loop, host: host, port: port) { path in
            switch path {
            case "/metrics":
                guard !others.isEmpty else { return (200, MetricsRegistry.contentType, metrics.render()) }
                var local: MetricsSnapshot?
                let remote = MetricsSource.gather(others, timeout: othersTimeout, callingLoop: handle) { local = metrics.snapshot() }
                let merged = MetricsSnapshot.merged((local.map { [$0] } ?? []) + remote)
                return (200, MetricsRegistry.contentType, merged.render())
            case "/healthz":
                return (200, MonitoringEndpoint.plainText, Array("ok\n".utf8))
            case "/readyz":
                switch readiness() {
                case .ready: return (200, MonitoringEndpoint.plainText, Array("ready\n".utf8))
                case .notReady(let reason): return (503, MonitoringEndpoint.plainText, Array("not ready: \(reason)\n".utf8))
                }
            default:
                return nil
            }
        }
    }

    /// Stops listening and closes open requests. Idempotent.
    public func stop() {
        endpoint?.stop()
        endpoint = nil
    }

    static let plainText = "text/plain; charset=utf-8"
}
