import Synchronization

/// The cap on open HTTP connections of one process, shared by the `HTTPServer`s of its
/// loops. Separate from the binary protocol's caps.
public final class HTTPConnectionGate: Sendable {
    public let maxConnections: Int
    private let count = Mutex(0)

    public init(maxConnections: Int) {
        self.maxConnections = max(0, maxConnections)
    }

    /// Connections holding a place now.
    public var open: Int { count.withLock { $0 } }

    /// Takes a place; false when all are taken.
    func enter() -> Bool {
        count.withLock { value in
            guard value < maxConnections else { return false }
            value += 1
            return true
        }
    }

    func leave() {
        count.withLock { value in value = max(0, value - 1) }
    }
}

/// What one HTTP request may cost the server.
public struct HTTPServerLimits: Sendable {
    /// The request line and headers together (evhttp_set_max_headers_size).
    public var maxHeaderBytes: Int
    /// The body, as sent or as announced by Content-Length (evhttp_set_max_body_size).
    public var maxBodyBytes: Int
    /// A request must arrive whole within this long of the connection opening or of the
    /// previous response being handed over (slow-client guard; also the keep-alive idle limit).
    public var requestDeadline: Duration

    public init(maxHeaderBytes: Int = 8 * 1024, maxBodyBytes: Int = 256 * 1024, requestDeadline: Duration = .seconds(10)) {
        self.maxHeaderBytes = maxHeaderBytes
        self.maxBodyBytes = maxBodyBytes
        self.requestDeadline = requestDeadline
    }
}

public enum HTTPMethod: Equatable, Sendable {
    case get, post, delete, head, put, patch, options, other
}
