import PushService

/// The outbox's metrics, one set per loop (summed over loops, but for the oldest age and the
/// link, which carry the loop's number).
public final class OutboxMetrics {
    public let forwarded: MetricCounter
    public let retries: MetricCounter
    public let busyMoves: MetricCounter
    public let expired: MetricCounter
    public let recalled: MetricCounter
    public let latency: LatencyHistogram
    public let linkUp: MetricGauge
    private let registry: MetricsRegistry
    private let loopLabel: MetricsRegistry.Labels

    public init(registry: MetricsRegistry, loop: Int?) {
        self.registry = registry
        let prefix = "securepush_store_outbox"
        loopLabel = loop.map { [("loop", "\($0)")] } ?? []
        forwarded = registry.counter("\(prefix)_forwarded_total", help: "Pushes of SENDs a gateway answered with PUSH_ACK.")
        retries = registry.counter("\(prefix)_retries_total",
                                   help: "Pushes of SENDs a gateway answered with an ERROR, to be sent again (after a pause, or through the next gateway after a BUSY).")
        busyMoves = registry.counter("\(prefix)_busy_moves_total",
                                     help: "Times a loop moved on to its next gateway address because its gateway answered a push BUSY (4.13-13).")
        expired = registry.counter("\(prefix)_expired_total",
                                   help: "Pushes of SENDs dropped unsent because their payload expired while no gateway took them.")
        recalled = registry.counter("\(prefix)_recalled_total",
                                    help: "Pushes of SENDs dropped unsent because their payload was recalled while no gateway had taken them.")
        latency = registry.histogram("\(prefix)_forward_latency_seconds",
                                     help: "From a SEND's payload being stored to a gateway's PUSH_ACK for its push, in seconds.")
        linkUp = registry.gauge("\(prefix)_gateway_link_up", help: "1 while this loop is connected to a gateway, else 0.",
                                labels: loopLabel)
    }

    func collect(depth: @escaping () -> Double, oldestAge: @escaping () -> Double) {
        registry.gauge("securepush_store_outbox_depth",
                       help: "Pushes of SENDs committed and not yet answered by a gateway (PUSH_ACK).", collect: depth)
        registry.gauge("securepush_store_outbox_oldest_age_seconds",
                       help: "Age of the oldest push of a SEND not yet answered by a gateway, in seconds (0 when none waits).",
                       labels: loopLabel, collect: oldestAge)
    }
}
