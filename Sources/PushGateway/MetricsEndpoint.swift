import Prometheus
import PushEventLoop
import PushService

/// Serves `GET /metrics` in the Prometheus text format from an `HTTPEndpoint` on the
/// gateway's event loop. Loop-confined: start and stop it on the loop's thread.
public final class MetricsEndpoint {
    private let registry: PrometheusCollectorRegistry
    private var endpoint: HTTPEndpoint?
    /// The bound port (the real one when 0 was asked for); 0 until started.
    public var port: Int { endpoint?.port ?? 0 }

    public init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
    }

    public enum Failure: Error, CustomStringConvertible {
        case listen(EventLoopError)
        public var description: String {
            switch self {
            case .listen(let error): "metrics endpoint: \(error)"
            }
        }
    }

    /// Binds `host` (a numeric address; port 0 picks one) and starts answering on `loop`.
    public func start(host: String, port: Int, loop: EventLoop) throws(Failure) {
        stop()
        let registry = registry
        do {
            endpoint = try HTTPEndpoint(loop: loop, host: host, port: port) { path in
                guard path == "/metrics" else { return nil }
                var body: [UInt8] = []
                registry.emit(into: &body)
                return (200, "text/plain; version=0.0.4; charset=utf-8", body)
            }
        } catch {
            throw .listen(error)
        }
    }

    /// Stops listening and closes open scrapes. Idempotent.
    public func stop() {
        endpoint?.stop()
        endpoint = nil
    }
}
