import CoreMetrics
import PushSession

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
    /// Connections waiting for HELLO_OK (`securepush_gateway_pending_handshakes`).
    public let pendingHandshakes: Meter
    /// Connections refused or closed before HELLO_OK, by reason
    /// (`securepush_gateway_connections_refused_total{reason="pending_per_address"}`).
    public let connectionsRefused: [ConnectionRefusal: Counter]

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
        pendingHandshakes = Meter(label: "securepush_gateway_pending_handshakes", factory: factory)
        var refused: [ConnectionRefusal: Counter] = [:]
        for reason in ConnectionRefusal.allCases {
            refused[reason] = Counter(label: "securepush_gateway_connections_refused_total",
                                      dimensions: [("reason", reason.rawValue)], factory: factory)
        }
        connectionsRefused = refused
    }

    /// What the connection host reports about admission.
    public func record(_ event: AdmissionEvent) {
        switch event {
        case .refused(let reason): connectionsRefused[reason]?.increment()
        case .pendingHandshakes(let count): pendingHandshakes.set(count)
        }
    }
}
