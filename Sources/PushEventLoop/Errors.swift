import Glibc
import PushWire

/// Failures setting up loops, listeners and sockets.
public enum EventLoopError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Not a usable address: a malformed literal, an empty host, or a port out of range.
    case invalidAddress(String)
    /// The host name has no address: `reason` is the resolver's (e.g. "Name or service
    /// not known"); `temporary` when asking again later may succeed (no answer from DNS).
    case cannotResolve(host: String, reason: String, temporary: Bool)
    /// A system call failed; `operation` names it.
    case system(operation: String, errno: Int32)
    /// libevent refused to allocate something (out of memory, or no usable backend).
    case libevent(String)

    public var description: String {
        switch self {
        case .invalidAddress(let text): "invalid address '\(text)'"
        case .cannotResolve(let host, let reason, _): "cannot resolve '\(host)': \(reason)"
        case .system(let operation, let code): "\(operation) failed: \(errnoString(code))"
        case .libevent(let what): "libevent: \(what)"
        }
    }
}

/// Why an outgoing connection did not come up.
public enum ConnectError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidAddress(String)
    /// The host name has no address (see `EventLoopError.cannotResolve`).
    case cannotResolve(host: String, reason: String, temporary: Bool)
    /// Binding the requested source address failed.
    case bindFailed(address: String, errno: Int32)
    /// Nobody listens on the port.
    case refused
    /// Any other socket-level failure.
    case system(errno: Int32)
    /// The TLS handshake failed: certificate verification, protocol mismatch, etc.
    /// OpenSSL's reasons in one line, the outermost first.
    case tls(String)
    /// The peer answered the TLS handshake with something that is not TLS: most likely
    /// a server speaking plain TCP. The OpenSSL reason goes with it.
    case notTLS(String)
    /// The peer closed the connection before the TLS handshake completed.
    case closedDuringHandshake
    /// `close()` was called, or the loop shut down, before the connection came up.
    case cancelled

    public var description: String {
        switch self {
        case .invalidAddress(let text): "invalid address '\(text)'"
        case .cannotResolve(let host, let reason, _): "cannot resolve '\(host)': \(reason)"
        case .bindFailed(let address, let code): "cannot bind source address \(address): \(errnoString(code))"
        case .refused: "connection refused"
        case .system(let code): "connect failed: \(errnoString(code))"
        case .tls(let message): "TLS handshake failed: \(message)"
        case .notTLS(let message): "the server does not speak TLS (\(message))"
        case .closedDuringHandshake: "peer closed the connection during the TLS handshake"
        case .cancelled: "connect cancelled"
        }
    }
}

/// Failures building a TLS context, with OpenSSL's own error text.
public enum TLSError: Error, Equatable, Sendable, CustomStringConvertible {
    case openSSL(operation: String, message: String)

    public var description: String {
        switch self {
        case .openSSL(let operation, let message): "\(operation): \(message)"
        }
    }
}

extension ConnectError {
    /// The same failure, for a caller that resolved the address itself.
    public init(_ error: EventLoopError) {
        switch error {
        case .cannotResolve(let host, let reason, let temporary): self = .cannotResolve(host: host, reason: reason, temporary: temporary)
        case .invalidAddress(let text): self = .invalidAddress(text)
        case .system(_, let code): self = .system(errno: code)
        case .libevent: self = .system(errno: ENOMEM)
        }
    }
}

/// Why a connection closed; handed to `ConnectionHandler.onClose` exactly once.
public enum CloseReason: Equatable, Sendable, CustomStringConvertible {
    /// The owner called `close()` or `closeAfterFlush()`.
    case local
    /// The peer closed its end (EOF, or a TLS close_notify).
    case peerClosed
    /// A socket error (ECONNRESET, EPIPE, ...).
    case error(errno: Int32)
    /// TLS failed after the connection was up (or a server-side handshake failed).
    case tlsError(String)
    /// The peer sent a frame header that cannot be trusted.
    case framingError(WireError)
    /// The output buffer went over `maxOutputBytes` and the owner chose to cut the peer off.
    case slowConsumer
    /// `closeAfterFlush(timeout:)` gave up waiting for the peer to read.
    case flushTimeout
    /// The event loop shut down with the connection still open.
    case loopShutdown

    public var description: String {
        switch self {
        case .local: "closed locally"
        case .peerClosed: "closed by peer"
        case .error(let code): "socket error: \(errnoString(code))"
        case .tlsError(let message): "TLS error: \(message)"
        case .framingError(let error): "framing error: \(error)"
        case .slowConsumer: "slow consumer: output buffer over its cap"
        case .flushTimeout: "peer did not drain output before the close deadline"
        case .loopShutdown: "event loop shut down"
        }
    }
}

func errnoString(_ code: Int32) -> String {
    guard let text = strerror(code) else { return "errno \(code)" }
    return "\(String(cString: text)) (errno \(code))"
}
