import PushEventLoop

extension MetricsRegistry {
    /// The refusals `http` counts itself, read at scrape time: `PREFIX_refused_at_cap_total`
    /// (connections over the gate's cap) and `PREFIX_deadline_closes_total` (connections shut
    /// at the request deadline). `connections` names whose they are in the help text, `cap`
    /// the cap. Read on the registry's loop, which must be the server's.
    public func watchRefusals(of http: HTTPServer, prefix: String, connections: String, cap: String) {
        counter("\(prefix)_refused_at_cap_total",
                help: "\(connections) connections answered 503 and closed because \(cap) was reached.") {
            Double(http.refusedAtCap)
        }
        counter("\(prefix)_deadline_closes_total",
                help: "\(connections) connections closed because a request did not arrive whole within the request deadline.") {
            Double(http.closedAtDeadline)
        }
    }
}
