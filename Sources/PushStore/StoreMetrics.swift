import PushService
import PushStoreLogic
import PushWire

/// The store's own counters and latency histograms, in a `MetricsRegistry` (the
/// connection metrics come from `ServiceHost.registerMetrics`). Requests are counted in a
/// flat table by type and status and rendered on scrape, so recording one costs an index
/// and an addition. Loop-confined.
public final class StoreMetrics {
    public let registry: MetricsRegistry
    public let payloadsStored: MetricCounter
    public let loginsFailed: MetricCounter
    /// LOGINs with the right password refused because the device is not enrolled ([4.6-4]).
    public let loginsDeviceNotEnrolled: MetricCounter
    /// Tokens refused as revoked ([7.3-3]), by why.
    public let tokensRevoked: [TokenRevocation: MetricCounter]
    /// Registry changes the store noticed (made by `device enroll`/`revoke`, `user remove`).
    public let registryEnrolments: MetricCounter
    public let registryRevocations: MetricCounter
    /// REGISTRY requests held until a change or the end of their wait.
    public let registryHeld: MetricGauge
    /// Group commits that failed (every request in the group was answered INTERNAL).
    public let commitFailures: MetricCounter
    /// Per request type slot: from the request read to its reply written.
    private var durations: [LatencyHistogram?]
    /// [type slot * statusSlots + status slot]
    private var requestCounts: [UInt64]

    // Request types are 0x10 to 0x1C, REGISTRY 0x24 and SEND 0x26; statuses 0x00 to 0x1F, then
    // INTERNAL (0xFF), then any other.
    private static let firstType: UInt8 = 0x10
    private static let typeSlots = 0x27 - 0x10
    private static let statusSlots = 0x22
    private static let prefix = "securepush_store"

    public init(registry: MetricsRegistry = MetricsRegistry(), served: Set<MessageType> = StoreServer.served) {
        self.registry = registry
        let prefix = StoreMetrics.prefix
        requestCounts = [UInt64](repeating: 0, count: StoreMetrics.typeSlots * StoreMetrics.statusSlots)
        durations = [LatencyHistogram?](repeating: nil, count: StoreMetrics.typeSlots)
        let types = served.filter { StoreMetrics.typeSlot($0) != nil }.sorted { $0.rawValue < $1.rawValue }
        payloadsStored = registry.counter("\(prefix)_payloads_stored_total", help: "Payloads stored durably (STORE_OK sent).")
        loginsFailed = registry.counter("\(prefix)_logins_failed_total",
                                        help: "LOGINs refused for an unknown user or a wrong password.")
        commitFailures = registry.counter("\(prefix)_commit_failures_total",
                                          help: "Group commits that failed; their requests were answered INTERNAL.")
        loginsDeviceNotEnrolled = registry.counter(
            "\(prefix)_logins_device_not_enrolled_total",
            help: "LOGINs with the right password refused because the registry holds no enrolled, unexpired registration of that device for that user (also counted in logins_failed_total).")
        var revoked: [TokenRevocation: MetricCounter] = [:]
        for reason in TokenRevocation.allCases {
            revoked[reason] = registry.counter("\(prefix)_tokens_revoked_total",
                                               help: "Valid, unexpired fetch tokens refused with BAD_TOKEN because their user was removed or their device is no longer enrolled, by reason.",
                                               labels: [("reason", String(reason.rawValue.map { $0 == " " ? "_" : $0 }))])
        }
        tokensRevoked = revoked
        let changesHelp = "Registry changes the store has seen (device enroll, device revoke, user remove), by the state they left."
        registryEnrolments = registry.counter("\(prefix)_registry_changes_total", help: changesHelp, labels: [("state", "enrolled")])
        registryRevocations = registry.counter("\(prefix)_registry_changes_total", help: changesHelp, labels: [("state", "revoked")])
        registryHeld = registry.gauge("\(prefix)_registry_held_requests",
                                      help: "REGISTRY requests from gateways held until the registry changes or their wait ends.")

        registry.family("\(prefix)_requests_total",
                        help: "Requests answered, by type (store, fetch, ...) and reply status (ok, not_found, ...).",
                        kind: .counter) { [unowned self] in
            var series: [(MetricsRegistry.Labels, Double)] = []
            for type in types {
                guard let slot = StoreMetrics.typeSlot(type) else { continue }
                for statusSlot in 0..<StoreMetrics.statusSlots {
                    let count = requestCounts[slot * StoreMetrics.statusSlots + statusSlot]
                    // OK is always shown, so each type has a series from the start.
                    guard count > 0 || statusSlot == 0 else { continue }
                    series.append(([("type", StoreMetrics.name(type)), ("status", StoreMetrics.statusName(slot: statusSlot))], Double(count)))
                }
            }
            return series
        }
        registry.family("\(prefix)_rate_limited_total",
                        help: "Requests refused with RATE_LIMITED (too many failed logins or rejected tokens), by type.",
                        kind: .counter) { [unowned self] in
            let statusSlot = StoreMetrics.statusSlot(.rateLimited)
            return types.compactMap { type in
                StoreMetrics.typeSlot(type).map { slot in
                    ([("type", StoreMetrics.name(type))], Double(requestCounts[slot * StoreMetrics.statusSlots + statusSlot]))
                }
            }
        }
        for type in types {
            guard let slot = StoreMetrics.typeSlot(type) else { continue }
            durations[slot] = registry.histogram("\(prefix)_request_duration_seconds",
                                                 help: "Time from a request read to its reply written, in seconds; for STORE, ACK and RECALL it includes the durable commit, for REGISTRY the time it was held.",
                                                 labels: [("type", StoreMetrics.name(type))])
        }
    }

    /// A request of `type` was answered with `reply`; it was read at `startNs`.
    public func answered(_ type: MessageType, with reply: Message, startNs: UInt64) {
        guard let slot = StoreMetrics.typeSlot(type) else { return }
        let status: Status = if case .error(let error) = reply { error.status } else { .ok }
        requestCounts[slot * StoreMetrics.statusSlots + StoreMetrics.statusSlot(status)] &+= 1
        durations[slot]?.observe(since: startNs)
    }

    /// Requests of `type` answered with `status` so far.
    public func requests(_ type: MessageType, status: Status) -> UInt64 {
        guard let slot = StoreMetrics.typeSlot(type) else { return 0 }
        return requestCounts[slot * StoreMetrics.statusSlots + StoreMetrics.statusSlot(status)]
    }

    // MARK: slots and names

    private static func typeSlot(_ type: MessageType) -> Int? {
        let slot = Int(type.rawValue) - Int(firstType)
        return slot >= 0 && slot < typeSlots ? slot : nil
    }

    private static func statusSlot(_ status: Status) -> Int {
        if status.rawValue < 0x20 { return Int(status.rawValue) }
        return status == .internalError ? 0x20 : 0x21
    }

    private static func statusName(slot: Int) -> String {
        switch slot {
        case 0x20: "internal"
        case 0x21: "other"
        default: Status(rawValue: UInt16(slot)).name.lowercased()
        }
    }

    static func name(_ type: MessageType) -> String { type.specName.lowercased() }
}
