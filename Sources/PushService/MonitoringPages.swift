import PushEventLoop

/// What each path of the monitoring endpoint answers. No I/O beyond asking other loops
/// for their metrics.
struct MonitoringPages {
    let metrics: MetricsRegistry
    let others: [MetricsSource]
    let othersTimeout: Duration
    let callingLoop: LoopHandle
    let readiness: () -> Readiness

    func answer(_ method: HTTPMethod, _ path: String) -> MonitoringResponse {
        guard method == .get else { return .plain(405, "method not allowed\n", extraHeaders: [("Allow", "GET")]) }
        switch path {
        case "/metrics":
            return MonitoringResponse(status: 200, contentType: MetricsRegistry.contentType, body: renderMetrics())
        case "/healthz":
            return .plain(200, "ok\n")
        case "/readyz":
            switch readiness() {
            case .ready: return .plain(200, "ready\n")
            case .notReady(let reason): return .plain(503, "not ready: \(reason)\n")
            }
        default:
            return .plain(404, "not found\n")
        }
    }

    private func renderMetrics() -> [UInt8] {
        guard !others.isEmpty else { return metrics.render() }
        var local: MetricsSnapshot?
        let remote = MetricsSource.gather(others, timeout: othersTimeout, callingLoop: callingLoop) { local = metrics.snapshot() }
        return MetricsSnapshot.merged((local.map { [$0] } ?? []) + remote).render()
    }
}

/// One whole answer of the monitoring endpoint, which closes the connection after it.
struct MonitoringResponse {
    var status: Int
    var contentType: String
    var body: [UInt8]
    var extraHeaders: [(String, String)] = []

    static func plain(_ status: Int, _ text: String, extraHeaders: [(String, String)] = []) -> MonitoringResponse {
        MonitoringResponse(status: status, contentType: "text/plain; charset=utf-8", body: Array(text.utf8), extraHeaders: extraHeaders)
    }

    /// evhttp adds Date and the reason phrase for these statuses, and for HEAD leaves the
    /// body out. Content-Length is set here: evhttp leaves it out of an answer to HTTP/1.0.
    func send(to request: HTTPServerRequest) {
        var headers = [("Content-Type", contentType), ("Connection", "close")] + extraHeaders
        if request.method != .head { headers.append(("Content-Length", "\(body.count)")) }
        request.respond(status: status, headers: headers, body: body)
    }
}
