import PushEventLoop

extension MetricsRegistry {
    /// The refusals `http` counts itself, read at scrape time: `PREFIX_refused_at_cap_total`
    /// (connections over the gate's cap), `PREFIX_refused_per_address_total` (over its cap
    /// for one address), `PREFIX_deadline_closes_total` (connections shut at the request
    /// deadline) and `PREFIX_requests_refused_total{reason}` (requests refused before the
    /// handler saw them, by `HTTPRequestRefusal`). `connections` names whose they are in the help text, `cap`
    /// the cap. Read on the registry's loop, which must be the server's.
    public func watchRefusals(of http: HTTPServer, prefix: String, connections: String, cap: String) {
        counter("\(prefix)_refused_at_cap_total",
                help: "\(connections) connections answered 503 and closed because \(cap) was reached.") {
            Double(http.refusedAtCap)
        }
        counter("\(prefix)_refused_per_address_total",
                help: "\(connections) connections answered 503 and closed because their address had its cap of open connections.") {
            Double(http.refusedPerAddress)
        }
        for reason in HTTPRequestRefusal.allCases {
            counter("\(prefix)_requests_refused_total",
                    help: "\(connections) requests refused before they were served (400, 413 or 417, then closed), by reason.",
                    labels: [("reason", reason.rawValue)]) {
                Double(http.refusals(reason))
            }
        }
        counter("\(prefix)_deadline_closes_total",
                help: "\(connections) connections closed because a request did not arrive whole within the request deadline.") {
            Double(http.closedAtDeadline)
        }
    }
}
