import Synchronization

/// The caps on open HTTP connections of one process, shared by the `HTTPServer`s of its
/// loops: `maxConnections` in all, `maxPerAddress` from one client address, so that one
/// address cannot take every place and others are still served. Separate from the binary
/// protocol's caps (whose per-address cap, `AdmissionControl`'s, counts connections still
/// in the handshake; an HTTP connection has no handshake and holds its place until closed).
public final class HTTPConnectionGate: Sendable {
    public let maxConnections: Int
    public let maxPerAddress: Int
    private let state = Mutex(Counts())

    private struct Counts {
        var open = 0
        var byAddress: [String: Int] = [:]
    }

    /// Why a connection gets no place.
    public enum Refusal: Sendable, Equatable {
        /// `maxConnections` are open.
        case atCap
        /// `maxPerAddress` are open from its address.
        case perAddress
    }

    /// `maxPerAddress` nil: no cap per address beyond `maxConnections`.
    public init(maxConnections: Int, maxPerAddress: Int? = nil) {
        self.maxConnections = max(0, maxConnections)
        self.maxPerAddress = max(0, maxPerAddress ?? maxConnections)
    }

    /// Connections holding a place now.
    public var open: Int { state.withLock { $0.open } }

    /// Connections from `address` holding a place now.
    public func open(from address: String) -> Int { state.withLock { $0.byAddress[address] ?? 0 } }

    /// Takes a place for a connection from `address`; nil when it has one.
    func enter(from address: String) -> Refusal? {
        state.withLock { counts in
            guard counts.open < maxConnections else { return .atCap }
            let fromAddress = counts.byAddress[address] ?? 0
            guard fromAddress < maxPerAddress else { return .perAddress }
            counts.open += 1
            counts.byAddress[address] = fromAddress + 1
            return nil
        }
    }

    func leave(from address: String) {
        state.withLock { counts in
            counts.open = max(0, counts.open - 1)
            let left = (counts.byAddress[address] ?? 1) - 1
            counts.byAddress[address] = left > 0 ? left : nil
        }
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
