import PushWire

/// The client's half: HELLO, waiting for HELLO_OK, keepalive answers, and the server's
/// GOAWAY. Which replies belong to which request is `RequestWindow`'s business.
extension SessionCore {
    /// The HELLO to send first ([5.1-1]).
    public mutating func start(_ hello: Hello, correlation: UInt32) -> SessionAction {
        role = hello.role
        helloCorrelation = correlation
        return .send(.hello(hello), correlation: correlation)
    }

    /// Whether requests may be sent now: after HELLO_OK and before any GOAWAY ([5.1-1], [5.5-2]).
    public var acceptsRequests: Bool { phase == .open }

    mutating func clientReceived(_ message: consuming Message, correlation: UInt32) -> SessionAction {
        if phase == .handshaking { return handshakeReply(message, correlation: correlation) }
        switch message {
        case .ping:
            noteRequest(correlation)
            return .send(.pong, correlation: correlation)
        case .pong where isOwnPing(correlation):
            return .none
        case .goaway(let goaway):
            // SHUTTING_DOWN still owes the replies up to last_correlation ([5.5-2]);
            // any other GOAWAY ends the connection now ([5.6-4]).
            let closeNow = goaway.status != .shuttingDown
            phase = closeNow ? .closed : .draining
            return .goaway(goaway, close: closeNow)
        case .hello:
            return .send(.error(ErrorReply(status: .badRequest, message: "a server does not send HELLO")), correlation: correlation)
        default:
            // A server's request (PUSH) counts for the last_correlation of our GOAWAY ([4.4-5]).
            if message.type.isRequest { noteRequest(correlation) }
            return .deliver(message, correlation: correlation)
        }
    }

    private mutating func handshakeReply(_ message: Message, correlation: UInt32) -> SessionAction {
        switch message {
        case .helloOK(let accepted) where correlation == helloCorrelation:
            negotiated = accepted
            phase = .open
            return .ready(accepted)
        case .error(let error) where correlation == helloCorrelation:
            phase = .closed
            return .refused(error.status, error.message)
        case .goaway(let goaway):
            phase = .closed
            return .refused(goaway.status, goaway.message)
        default:
            // A server sends nothing else before HELLO_OK; a stray frame is no reason to fail.
            return .none
        }
    }
}
