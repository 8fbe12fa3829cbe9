import PushSession

extension ServiceHost {
    /// The connection metrics every service has, named `PREFIX_connections` and so on, read
    /// from the host's own counts at scrape time (nothing is counted twice on the hot path).
    ///
    /// Hosts that share their caps with other loops' hosts (`AdmissionGate`) read counts of
    /// the whole process: pass `includingSharedCounts` true for one of them only, so that
    /// summing the loops' metrics counts each connection once. `loop`, for a loop of
    /// several, adds `PREFIX_loop_connections{loop="N"}`: how evenly the loops share the work.
    public func registerMetrics(in registry: MetricsRegistry, prefix: String, includingSharedCounts: Bool = true, loop: Int? = nil) {
        if let loop {
            registry.gauge("\(prefix)_loop_connections", help: "Connections open on this loop thread now, by loop.",
                           labels: [("loop", "\(loop)")]) { [weak self] in
                Double(self?.connectionCount ?? 0)
            }
        }
        if ownsAdmission || includingSharedCounts {
            registry.gauge("\(prefix)_connections", help: "Peers admitted (past HELLO_OK) and connected now.") { [weak self] in
                Double(self?.admittedCount ?? 0)
            }
            registry.gauge("\(prefix)_pending_handshakes",
                           help: "Connections accepted and waiting for HELLO_OK now.") { [weak self] in
                Double(self?.pendingHandshakeCount ?? 0)
            }
            for reason in ConnectionRefusal.allCases {
                registry.counter("\(prefix)_connections_refused_total",
                                 help: "Connections refused or closed before HELLO_OK, by reason, since the start.",
                                 labels: [("reason", reason.rawValue)]) { [weak self] in
                    Double(self?.refusals(reason) ?? 0)
                }
            }
        }
        registry.gauge("\(prefix)_hellos_awaiting_decision",
                       help: "HELLOs held unanswered now while the service decides (a registration its registry has not heard of yet).") {
            [weak self] in Double(self?.awaitingDecisionCount ?? 0)
        }
        registry.family("\(prefix)_hellos_refused_total",
                        help: "HELLOs refused by the credential check, by the status sent (bad_credentials, ...), since the start.",
                        kind: .counter) { [weak self] in
            guard let self else { return [] }
            return helloRefusals.sorted { $0.key.rawValue < $1.key.rawValue }.map { status, count in
                ([("status", status.name.lowercased())], Double(count))
            }
        }
    }
}
