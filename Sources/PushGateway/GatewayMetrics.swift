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
    /// PUSHes with `once` 1 answered from memory ([4.13-12]), neither written nor queued
    /// again: counted by each loop (or cluster member) that answered its share so.
    public let pushesRepeated: MetricCounter
    /// Ids of PUSHes with `once` 1 remembered now (at most `GatewaySettings.onceMemory`
    /// per loop). An id whose window is up is forgotten at the next such PUSH.
    public let onceRemembered: MetricGauge
    /// HELLO credentials refused, by role and reason (issue 12.7): the series exist from the
    /// start, at 0, so an alert can watch them.
    private let credentialRefusals: [CredentialRefusal: MetricCounter]
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
        pushesRepeated = registry.counter("\(prefix)_pushes_repeated_total", help: """
            PUSHes with once 1 whose id the gateway remembered: answered with the first one's counts, neither written nor \
            queued again (counted by each loop or cluster node that answered its share of the PUSH so).
            """)
        onceRemembered = registry.gauge("\(prefix)_once_ids_remembered",
                                        help: "Ids of PUSHes with once 1 the gateway remembers, to answer a repeat within 300 s with the first one's counts.")
        var refusals: [CredentialRefusal: MetricCounter] = [:]
        for refusal in CredentialRefusal.allCases {
            refusals[refusal] = registry.counter(
                "\(prefix)_credentials_refused_total",
                help: "HELLO credentials refused, by the role of the peer and the reason (missing, bad, expired, replayed, not_enrolled, revoked).",
                labels: [("role", refusal.role), ("reason", refusal.reason)])
        }
        credentialRefusals = refusals
        pushDuration = registry.histogram("\(prefix)_push_duration_seconds",
                                          help: "Time from a provider's PUSH read to its PUSH_ACK written, in seconds.")
        deliveryDuration = registry.histogram("\(prefix)_delivery_duration_seconds",
                                              help: "Time from a push written to a device to its DELIVERY_ACK read, in seconds.")
    }
}

extension GatewayMetrics {
    /// Counts a refused HELLO credential.
    public func credentialRefused(_ refusal: CredentialRefusal) {
        credentialRefusals[refusal]?.increment()
    }
}

/// Why the gateway refused a HELLO credential, for its metrics and logs.
public enum CredentialRefusal: CaseIterable, Sendable {
    case deviceMissing, deviceBad, deviceExpired, deviceNotEnrolled, deviceRevoked
    case providerMissing, providerBad, providerExpired, providerReplayed

    public var role: String {
        switch self {
        case .deviceMissing, .deviceBad, .deviceExpired, .deviceNotEnrolled, .deviceRevoked: "device"
        case .providerMissing, .providerBad, .providerExpired, .providerReplayed: "provider"
        }
    }

    /// The reason as logged and labelled.
    public var reason: String {
        switch self {
        case .deviceMissing, .providerMissing: "missing"
        case .deviceBad, .providerBad: "bad"
        case .deviceExpired, .providerExpired: "expired"
        case .providerReplayed: "replayed"
        case .deviceNotEnrolled: "not_enrolled"
        case .deviceRevoked: "revoked"
        }
    }
}

/// The metrics of a gateway that follows the store's device registry (`--store`).
/// Loop-confined.
public final class RegistryMetrics {
    /// Enrolled registrations held.
    public let enrolled: MetricGauge
    /// Revoked registrations held until they expire.
    public let revoked: MetricGauge
    /// 1 once the registry was loaded from the store.
    public let loaded: MetricGauge
    /// 1 while the link to the store is up.
    public let linkUp: MetricGauge
    /// The change sequence number the gateway has read up to.
    public let cursor: MetricGauge
    public let revocations: MetricCounter
    public let entriesIgnored: MetricCounter
    public let devicesRevoked: MetricCounter
    public let pushesRevoked: MetricCounter
    public let hellosBeforeLoad: MetricCounter

    public init(registry: MetricsRegistry) {
        let prefix = "securepush_gateway_registry"
        let entriesHelp = "Registrations in the gateway's copy of the store's device registry, by state."
        enrolled = registry.gauge("\(prefix)_entries", help: entriesHelp, labels: [("state", "enrolled")])
        revoked = registry.gauge("\(prefix)_entries", help: entriesHelp, labels: [("state", "revoked")])
        loaded = registry.gauge("\(prefix)_loaded", help: "1 once the device registry was loaded from the store (by every loop), 0 before.")
        linkUp = registry.gauge("\(prefix)_link_up", help: "1 while the gateway's connection to the store is up.")
        cursor = registry.gauge("\(prefix)_cursor", help: "The registry change sequence number the gateway has read up to.")
        revocations = registry.counter("\(prefix)_revocations_total",
                                       help: "Enrolled registrations the gateway learned were revoked or replaced by a newer enrolment.")
        entriesIgnored = registry.counter("\(prefix)_entries_ignored_total",
                                          help: "Registry entries ignored because their credential does not verify under the server key.")
        devicesRevoked = registry.counter("securepush_gateway_devices_revoked_total",
                                          help: "Device connections closed with GOAWAY REVOKED because their registration was revoked.")
        pushesRevoked = registry.counter("securepush_gateway_pushes_revoked_total",
                                         help: "Queued pushes dropped because their device's registration was revoked.")
        hellosBeforeLoad = registry.counter("securepush_gateway_hellos_before_registry_total",
                                            help: "Device HELLOs answered BUSY because the registry was not loaded yet.")
    }
}
