import PushEventLoop
import PushWire

/// Why a client request or connection failed.
public enum ClientError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The server answered ERROR (or GOAWAY) with this status.
    case status(Status, String?)
    /// The connection went away before the reply came; the request may be retried.
    case disconnected
    /// The server refused the handshake.
    case refused(Status, String?)
    case connect(ConnectError)
    case timedOut
    /// The reply was of a type that does not answer the request.
    case unexpectedReply(MessageType)
    case stopped
    /// The request does not fit the frame size the server negotiated; it was not sent.
    case frameTooLarge(size: Int, limit: Int)

    public var description: String {
        switch self {
        case .status(let status, let text): "\(status)" + (text.map { ": \($0)" } ?? "")
        case .disconnected: "the connection was lost before the reply came"
        case .refused(let status, let text): "the server refused the connection: \(status)" + (text.map { " (\($0))" } ?? "")
        case .connect(let error): "cannot connect: \(error)"
        case .timedOut: "timed out waiting for the server"
        case .unexpectedReply(let type): "unexpected reply \(type)"
        case .stopped: "the client was stopped"
        case .frameTooLarge(let size, let limit): "the request is \(size) bytes, over the server's \(limit)-byte frame limit"
        }
    }

    /// The status a server gave, if that is what this is.
    public var status: Status? {
        switch self {
        case .status(let status, _), .refused(let status, _): status
        default: nil
        }
    }
}
