import PushService

/// The gateway's own counters, gauges and latency histograms, in a `MetricsRegistry`
/// (the connection metrics come from `ServiceHost.registerMetrics`). Loop-confined.
public final class GatewayMetrics {
    public let registry: MetricsRegistry
    public let devicesOnline: MetricGauge
    public let pushesAccepted: MetricCounter
    public let pushesWritten: MetricCounter
    public let pushesAcknowledged: MetricCounter
    /// DELIVERY_ACKs ignored: the correlation names no push awaiting acknowledgement (a
    /// repeat, or one for a connection already gone).
    public let deliveryAcksUnknown: MetricCounter
    /// DELIVERY_ACKs ignored: the id is not the one of the PUSH with that correlation.
    public let deliveryAcksMismatched: MetricCounter
    /// Written, then put back in the queue because the connection closed before DELIVERY_ACK.
    public let pushesRequeued: MetricCounter
    public let pushesQueued: MetricCounter
    public let pushesDropped: MetricCounter
    public let pushesExpired: MetricCounter
    public let pushesCollapsed: MetricCounter
    public let slowConsumersCut: MetricCounter
    /// From a provider's PUSH read to its PUSH_ACK written.
    public let pushDuration: LatencyHistogram
    /// From a push written to a device to the device's DELIVERY_ACK for it.
    public let deliveryDuration: LatencyHistogram

    public init(registry: MetricsRegistry = MetricsRegistry()) {
        self.registry = registry
        let prefix = "securepush_gateway"
        devicesOnline = registry.gauge("\(prefix)_devices_online", help: "Devices connected now.")
        pushesAccepted = registry.counter("\(prefix)_pushes_accepted_total", help: "PUSH requests accepted from providers.")
        pushesWritten = registry.counter("\(prefix)_pushes_written_total",
                                         help: "Pushes written to a device connection (one per device a PUSH reaches).")
        pushesAcknowledged = registry.counter("\(prefix)_pushes_acknowledged_total",
                                              help: "Pushes a device acknowledged with DELIVERY_ACK.")
        deliveryAcksUnknown = registry.counter("\(prefix)_delivery_acks_unknown_total",
                                               help: "DELIVERY_ACKs ignored because no push awaits acknowledgement under their correlation id.")
        deliveryAcksMismatched = registry.counter("\(prefix)_delivery_acks_mismatched_total",
                                                  help: "DELIVERY_ACKs ignored because their id is not that of the push with their correlation id.")
        pushesRequeued = registry.counter("\(prefix)_pushes_requeued_total",
                                          help: "Pushes written and put back in the queue because the connection closed before DELIVERY_ACK.")
        pushesQueued = registry.counter("\(prefix)_pushes_queued_total",
                                        help: "Pushes queued for a device that was offline or behind its delivery window.")
        pushesDropped = registry.counter("\(prefix)_pushes_dropped_total",
                                         help: "Queued pushes dropped because a device's queue was full (the device is told with MISSED).")
        pushesExpired = registry.counter("\(prefix)_pushes_expired_total",
                                         help: "Queued pushes dropped because their TTL ran out or their connection-only device left.")
        pushesCollapsed = registry.counter("\(prefix)_pushes_collapsed_total",
                                           help: "Queued pushes replaced by a newer push with the same collapse key.")
        slowConsumersCut = registry.counter("\(prefix)_slow_consumers_cut_total",
                                            help: "Connections closed because they left too much output unread.")
        pushDuration = registry.histogram("\(prefix)_push_duration_seconds",
                                          help: "Time from a provider's PUSH read to its PUSH_ACK written, in seconds.")
        deliveryDuration = registry.histogram("\(prefix)_delivery_duration_seconds",
                                              help: "Time from a push written to a device to its DELIVERY_ACK read, in seconds.")
    }
}
