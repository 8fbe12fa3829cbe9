import PushEventLoop
import PushSealing
import PushWire

/// Why a client request or connection failed.
public enum ClientError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The server answered ERROR with this status.
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
    /// The server ended an established connection with GOAWAY and this status
    /// (SHUTTING_DOWN, REPLACED, TIMEOUT, ...) and text.
    case goaway(Status, String?)
    /// Nothing came back for HELLO: the server closed the connection (`closed`) or sent
    /// nothing before the HELLO deadline. A TLS server does that to a plain client.
    case noHelloReply(closed: Bool)
    /// The server answered HELLO in TLS, or said it speaks TLS: this client spoke plain TCP.
    case serverSpeaksTLS
    /// The server answered HELLO with bytes that are not a securepush frame (an HTTP
    /// server, say); what the decoder found wrong.
    case notSecurePush(String)
    /// LOGIN_OK named another key than the one the device sent ([4.6-8]): the store did not
    /// register this device's key, so payloads sealed to the key it names are not this device's.
    case keyIDMismatch(sent: KeyID, registered: KeyID)
    /// The store answered KEYS with UNKNOWN_TYPE: it is of a revision before 1.5 and cannot
    /// take sealed payloads, so nothing is sealed for it (a 1.4 store would refuse them anyway).
    case storeCannotSeal
    /// The payload could not be sealed to the recipient's keys (no key, a key the sealer refuses).
    case sealing(SealingError)

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
        case .goaway(let status, let text): "the server closed the connection: \(ClientError.goawayReason(status, text))"
        case .noHelloReply(closed: true): "the server closed the connection during the handshake; it may be a TLS server"
        case .noHelloReply(closed: false): "the server did not answer HELLO; it may be a TLS server"
        case .serverSpeaksTLS: "the server speaks TLS and this client connected with plain TCP"
        case .notSecurePush(let detail): "the server does not speak the securepush protocol (\(detail))"
        case .keyIDMismatch(let sent, let registered):
            "the store registered key \(registered), not this device's key \(sent): the login is refused, since payloads sealed to that key are not for this device"
        case .storeCannotSeal: "the store does not know KEYS (a store before protocol revision 1.5): it cannot take sealed payloads"
        case .sealing(let error): "cannot seal: \(error)"
        }
    }

    /// What a GOAWAY status means for the client that received it, in words.
    public static func goawayReason(_ status: Status, _ text: String?) -> String {
        let detail = text.map { " (\($0))" } ?? ""
        return switch status {
        case .replaced: "replaced by another connection with the same device id"
        case .revoked: "this device's registration was revoked; enroll it again with `securepush device enroll`"
        case .shuttingDown: "server shutting down"
        case .timeout: "timed out" + detail
        case .slowConsumer: "this client read too slowly and fell too far behind"
        case .frameTooLarge: "a frame was over the negotiated size limit"
        case .malformedFrame, .unknownType, .badRequest: "the server could not read what this client sent" + detail
        default: "\(status)" + detail
        }
    }

    /// The status a server gave, if that is what this is.
    public var status: Status? {
        switch self {
        case .status(let status, _), .refused(let status, _), .goaway(let status, _): status
        default: nil
        }
    }

    /// True for failures that retrying cannot cure: a credential or role the server
    /// refuses, a certificate that does not verify, TLS on one side only, a name that does
    /// not exist, another connection that took over this device, a registration revoked
    /// (GOAWAY REVOKED, or a HELLO refused with BAD_CREDENTIALS). Connection refused,
    /// lost, timed out, BUSY or a server shutting down may pass, and are not permanent.
    public var isPermanent: Bool {
        switch self {
        case .refused(let status, _): ServerLink.isPermanentRefusal(status)
        case .goaway(let status, _): status == .replaced || status == .revoked
        case .serverSpeaksTLS, .notSecurePush: true
        case .connect(let error):
            switch error {
            case .tls, .notTLS, .invalidAddress, .bindFailed: true
            case .cannotResolve(_, _, let temporary): !temporary
            case .refused, .system, .closedDuringHandshake, .cancelled: false
            }
        case .keyIDMismatch, .storeCannotSeal: true
        case .status, .disconnected, .timedOut, .unexpectedReply, .stopped, .frameTooLarge, .noHelloReply, .sealing: false
        }
    }
}
