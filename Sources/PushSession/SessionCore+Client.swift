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
        case .error(var refusal) where refusal.status == .ok:
            // An ERROR carrying OK fails its request as INTERNAL ([6-6]), which may be retried.
            refusal.status = .internalError
            return .deliver(.error(refusal), correlation: correlation)
        default:
            if message.type.isRequest {
                if !serves(message.type) {
                    let refusal = "a \(role.map { "\($0)" } ?? "client") does not serve \(message.type.specName)"
                    return .send(.error(ErrorReply(status: .badRequest, message: refusal)), correlation: correlation)   // [4.1-4]
                }
                // A server's request counts for the last_correlation of our GOAWAY ([4.4-5]).
                noteRequest(correlation)
            }
            return .deliver(message, correlation: correlation)
        }
    }

    /// The requests a client serves besides PING: a device takes PUSH from its gateway, a
    /// provider nothing; a gateway's link to the store passes everything to its owner.
    private func serves(_ type: MessageType) -> Bool {
        switch role {
        case .device?: type == .push
        case .provider?: false
        default: true
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
