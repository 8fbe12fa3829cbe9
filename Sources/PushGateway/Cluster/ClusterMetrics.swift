import PushService

/// The metrics of a gateway that is a node of a cluster (`--cluster`). Loop-confined.
final class ClusterMetrics {
    let natsConnected: MetricGauge
    /// Registered on a node's first loop only: each loop hears the same nodes.
    let nodesAlive: MetricGauge?
    let pushesForwarded: MetricCounter
    let forwardsReceived: MetricCounter
    let forwardsFailed: MetricCounter
    let queueWrites: MetricCounter
    let queueConflicts: MetricCounter
    let queueFailures: MetricCounter
    let queuesTaken: MetricCounter
    let unreached: MetricCounter
    let replacedElsewhere: MetricCounter
    let malformed: MetricCounter
    /// By `ClusterAuthError`, each counted under its `reason` label.
    private let rejectedByReason: [ClusterAuthError: MetricCounter]

    init(registry: MetricsRegistry, countsNodes: Bool = true) {
        let prefix = "securepush_gateway_cluster"
        natsConnected = registry.gauge("\(prefix)_nats_connected",
                                       help: "Connections to NATS that are up: one per loop of the node (1 for a node on one loop).")
        nodesAlive = countsNodes
            ? registry.gauge("\(prefix)_nodes", help: "Nodes of the cluster heard from recently, this one included.") : nil
        pushesForwarded = registry.counter("\(prefix)_forwards_sent_total",
                                           help: "Pushes sent to another node for devices connected there (one per node a push went to).")
        forwardsReceived = registry.counter("\(prefix)_forwards_received_total", help: "Pushes other nodes sent here.")
        forwardsFailed = registry.counter("\(prefix)_forwards_failed_total",
                                          help: "Pushes to another node that got no answer in time; their devices' pushes were queued in JetStream instead.")
        queueWrites = registry.counter("\(prefix)_queue_writes_total", help: "Device queues written to JetStream.")
        queueConflicts = registry.counter("\(prefix)_queue_conflicts_total",
                                          help: "Queue writes retried because another node wrote the same queue first.")
        queueFailures = registry.counter("\(prefix)_queue_failures_total",
                                         help: "Queue reads or writes that failed (NATS or JetStream unavailable); the pushes they carried were not queued.")
        unreached = registry.counter("\(prefix)_pushes_unreached_total",
                                     help: "Devices a PUSH matched that only the cluster could reach while NATS or JetStream could not be reached; the PUSH was answered BUSY.")
        queuesTaken = registry.counter("\(prefix)_queues_taken_total", help: "Queues taken from JetStream for devices connected here.")
        replacedElsewhere = registry.counter("\(prefix)_replaced_elsewhere_total",
                                             help: "Device connections closed with GOAWAY REPLACED for a newer connection on another node.")
        malformed = registry.counter("\(prefix)_messages_malformed_total", help: "Cluster messages dropped because they did not parse.")
        rejectedByReason = Dictionary(uniqueKeysWithValues: ClusterAuthError.allCases.map { reason in
            (reason, registry.counter("\(prefix)_messages_rejected_total",
                                      help: "Cluster messages and queue records not trusted because their authentication failed, by reason: unsealed, truncated, bad_tag (forged, altered or moved to another subject), sender (sealed by one member in another's name), clock (out of the time window) or replayed.",
                                      labels: [("reason", reason.rawValue)]))
        })
    }

    /// Counts a message or record refused for `reason`.
    func rejected(_ reason: ClusterAuthError) {
        rejectedByReason[reason]?.increment()
    }
}
