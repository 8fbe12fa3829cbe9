import PushEventLoop
import PushProviderAPI
import PushService
import Synchronization

/// What the loops of one store share for the HTTP API: the connection caps, the listening
/// sockets the first loop bound (the others accept on them too), and the answers counted
/// by route, status and provider.
final class StoreHTTPShared: Sendable {
    let gate: HTTPConnectionGate
    private let bound = Mutex<SharedListenSockets?>(nil)
    private let counts = Mutex<[StoreHTTPMetrics.AnswerKey: Int]>([:])

    init(_ configuration: StoreHTTPConfiguration) {
        gate = HTTPConnectionGate(maxConnections: configuration.maxConnections, maxPerAddress: configuration.maxConnectionsPerAddress)
    }

    /// Set by the first loop once it listens; the others start after it.
    var sockets: SharedListenSockets? {
        get { bound.withLock { $0 } }
        set { bound.withLock { $0 = newValue } }
    }

    func count(_ key: StoreHTTPMetrics.AnswerKey) {
        counts.withLock { $0[key, default: 0] += 1 }
    }

    var answerCounts: [StoreHTTPMetrics.AnswerKey: Int] { counts.withLock { $0 } }
}

/// The HTTP API's metrics. Answers are counted once for the process (the first loop
/// registers the family), so a provider's series is one whichever loop served it.
final class StoreHTTPMetrics {
    struct AnswerKey: Hashable, Sendable {
        var route: String
        var status: Int
        var provider: String
    }

    let refusedTokens: MetricCounter
    private let registry: MetricsRegistry
    private let shared: StoreHTTPShared

    init(registry: MetricsRegistry, shared: StoreHTTPShared, speaksForProcess: Bool) {
        self.registry = registry
        self.shared = shared
        refusedTokens = registry.counter("securepush_store_http_tokens_refused_total",
                                         help: "HTTP API requests whose bearer token was unknown, revoked or wrong.")
        guard speaksForProcess else { return }
        registry.family("securepush_store_http_requests_total",
                        help: "HTTP API requests answered, by route, HTTP status and the API token's provider (\"-\" before a token was accepted).",
                        kind: .counter) {
            shared.answerCounts.map { key, count in
                ([("route", key.route), ("status", "\(key.status)"), ("provider", key.provider)], Double(count))
            }
        }
        registry.gauge("securepush_store_http_connections", help: "Open HTTP API connections.") {
            Double(shared.gate.open)
        }
    }

    /// Counters the loop's server keeps.
    func watch(_ http: HTTPServer) {
        registry.watchRefusals(of: http, prefix: "securepush_store_http", connections: "HTTP API", cap: "the HTTP connection cap")
    }

    func answered(route: ProviderAPIRoute?, status: Int, provider: String?) {
        shared.count(AnswerKey(route: route?.name ?? "other", status: status, provider: provider ?? "-"))
    }
}
