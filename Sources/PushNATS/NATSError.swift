import CNats

/// What a NATS operation can fail with. Typed so callers can tell a transient outage
/// (`.notConnected`, `.timeout`, `.noResponders`) from a refusal (`.jetStream`).
public enum NATSError: Error, Equatable, Sendable {
    case invalidURL(String)
    /// A natsStatus and nats_GetLastError's text.
    case library(status: Int32, text: String)
    case notConnected
    case timeout
    case noResponders
    /// A JetStream API error reply: its HTTP-like code, JetStream's own error code, and text.
    case jetStream(code: Int, errorCode: Int, description: String)
    case malformedReply(String)
    /// A subject (or stream name) that is not a valid NATS subject: empty, an empty token,
    /// whitespace or a control character. Refused before anything is sent.
    case invalidSubject(String)
    /// A TLS file libnats could not load (missing, unreadable, not PEM, a key that does not
    /// match its certificate).
    case tlsFile(path: String, reason: String)
    /// A server answered but refused the connection: TLS (its certificate, ours) or the
    /// credentials. Retrying cannot help.
    case refused(server: String, reason: String)

    /// JetStream's "wrong last sequence" (10071): an expected last sequence did not match.
    public var isWrongLastSequence: Bool {
        if case .jetStream(_, 10071, _) = self { return true }
        return false
    }

    /// The error for a failed libnats call, with the calling thread's last error text
    /// (libnats keeps it per thread, so it must be read right after the call).
    static func library(_ status: natsStatus) -> NATSError {
        switch status {
        case NATS_CONNECTION_CLOSED: return .notConnected
        case NATS_TIMEOUT: return .timeout
        case NATS_NO_RESPONDERS: return .noResponders
        default: break
        }
        var text = ""
        if let last = nats_GetLastError(nil) { text = String(cString: last) }
        if text.isEmpty, let plain = natsStatus_GetText(status) { text = String(cString: plain) }
        return .library(status: Int32(bitPattern: status.rawValue), text: text)
    }
}

extension NATSError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .invalidURL(let url): "invalid NATS server URL: \(NATSNames.redacted(url))"
        case .library(let status, let text): "libnats error \(status): \(text)"
        case .notConnected: "not connected to NATS"
        case .timeout: "NATS request timed out"
        case .noResponders: "no responders for the NATS request"
        case .jetStream(let code, let errorCode, let description): "JetStream error \(code)/\(errorCode): \(description)"
        case .malformedReply(let text): "malformed NATS reply: \(text)"
        case .invalidSubject(let subject): "invalid NATS subject: \(subject)"
        case .tlsFile(let path, let reason): "cannot load the NATS TLS file \(path): \(reason)"
        case .refused(let server, let reason): "NATS server \(server) refused the connection: \(reason)"
        }
    }
}

/// The events a connection reports on its loop. `gaveUp`: libnats gave up on the
/// connection and a new one will be opened (`NATSConnection.ReopenSettings`).
public enum NATSConnectionEvent: Equatable, Sendable {
    case connected, disconnected, reconnected, gaveUp, closed
}

/// Counters from libnats, since the connection was made.
public struct NATSStatistics: Equatable, Sendable {
    public var inMsgs: UInt64 = 0
    public var outMsgs: UInt64 = 0
    public var inBytes: UInt64 = 0
    public var outBytes: UInt64 = 0
    public var reconnects: UInt64 = 0

    public init(inMsgs: UInt64 = 0, outMsgs: UInt64 = 0, inBytes: UInt64 = 0, outBytes: UInt64 = 0, reconnects: UInt64 = 0) {
        self.inMsgs = inMsgs
        self.outMsgs = outMsgs
        self.inBytes = inBytes
        self.outBytes = outBytes
        self.reconnects = reconnects
    }
}
