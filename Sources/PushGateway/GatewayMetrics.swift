import CoreMetrics

/// The gateway's counters and gauges, through swift-metrics: `GatewayConfiguration.metricsFactory`
/// decides where they go (the CLI exports them in the Prometheus text format).
public final class GatewayMetrics {
    public let connections: Meter
    public let devicesOnline: Meter
    public let pushesAccepted: Counter
    public let pushesWritten: Counter
    public let pushesAcknowledged: Counter
    /// DELIVERY_ACKs ignored: the correlation names no push awaiting acknowledgement (a
    /// repeat, or one for a connection already gone).
    public let deliveryAcksUnknown: Counter
    /// DELIVERY_ACKs ignored: the id is not the one of the PUSH with that correlation.
    public let deliveryAcksMismatched: Counter
    /// Written, then put back in the queue because the connection closed before DELIVERY_ACK.
    public let pushesRequeued: Counter
    public let pushesQueued: Counter
    public let pushesDropped: Counter
    public let pushesExpired: Counter
    public let pushesCollapsed: Counter
    public let slowConsumersCut: Counter

    public init(factory: any MetricsFactory) {
        connections = Meter(label: "securepush_gateway_connections", factory: factory)
        devicesOnline = Meter(label: "securepush_gateway_devices_online", factory: factory)
        pushesAccepted = Counter(label: "securepush_gateway_pushes_accepted_total", factory: factory)
        pushesWritten = Counter(label: "securepush_gateway_pushes_written_total", factory: factory)
        pushesAcknowledged = Counter(label: "securepush_gateway_pushes_acknowledged_total", factory: factory)
        deliveryAcksUnknown = Counter(label: "securepush_gateway_delivery_acks_unknown_total", factory: factory)
        deliveryAcksMismatched = Counter(label: "securepush_gateway_delivery_acks_mismatched_total", factory: factory)
        pushesRequeued = Counter(label: "securepush_gateway_pushes_requeued_total", factory: factory)
        pushesQueued = Counter(label: "securepush_gateway_pushes_queued_total", factory: factory)
        pushesDropped = Counter(label: "securepush_gateway_pushes_dropped_total", factory: factory)
        pushesExpired = Counter(label: "securepush_gateway_pushes_expired_total", factory: factory)
        pushesCollapsed = Counter(label: "securepush_gateway_pushes_collapsed_total", factory: factory)
        slowConsumersCut = Counter(label: "securepush_gateway_slow_consumers_cut_total", factory: factory)
    }
}
