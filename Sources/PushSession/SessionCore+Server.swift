import PushWire

/// The server's half: HELLO first, negotiation, admission, role and service checks,
/// max_inflight, and the graceful drain.
extension SessionCore {
    var limits: ServiceLimits? {
        if case .server(let limits, _) = side { return limits }
        return nil
    }

    mutating func serverReceived(_ message: consuming Message, correlation: UInt32) -> SessionAction {
        guard phase == .open || phase == .draining else { return beforeAdmission(message, correlation: correlation) }
        switch message {
        case .hello:
            noteRequest(correlation)
            return .send(.error(ErrorReply(status: .badRequest, message: "HELLO was already accepted")), correlation: correlation)
        case .ping:
            noteRequest(correlation)
            return .send(.pong, correlation: correlation)
        case .pong, .error:
            return .none
        case .goaway:
            phase = .closed
            return .close
        default:
            guard message.type.isRequest else { return .deliver(message, correlation: correlation) }
            // After GOAWAY SHUTTING_DOWN nothing new is taken on ([5.5-1]).
            guard phase == .open else { return .none }
            noteRequest(correlation)
            return serve(message, correlation: correlation)
        }
    }

    /// Role, then service ([4.1-5]), then max_inflight ([5.3-4]).
    private mutating func serve(_ message: consuming Message, correlation: UInt32) -> SessionAction {
        let type = message.type
        if let role, !RolePolicy.allows(type, from: role) {
            return .send(.error(ErrorReply(status: .forbidden, message: "\(type) is not allowed for a \(role)")), correlation: correlation)
        }
        if let limits, !limits.serves(type) {
            return .send(.error(ErrorReply(status: .badRequest, message: "\(limits.name) does not serve \(type)")), correlation: correlation)
        }
        guard inflight < Int(negotiated?.maxInflight ?? 1) else {
            return .send(.error(ErrorReply(status: .busy, message: "more than max_inflight requests outstanding")), correlation: correlation)
        }
        inflight += 1
        return .serve(message, correlation: correlation)
    }

    private mutating func beforeAdmission(_ message: Message, correlation: UInt32) -> SessionAction {
        // Only HELLO, and only once; anything else was never processed, so GOAWAY names
        // no request as the last one ([5.1-2], [4.4-1]).
        guard phase == .handshaking, case .hello(let hello) = message, let limits, case .server(_, let overLimit) = side else {
            return fatal(.helloRequired, "the first frame must be HELLO")
        }
        switch HelloNegotiation.negotiate(hello, limits: limits, overConnectionLimit: overLimit) {
        case .fatal(let status, let text):
            return fatal(status, text)
        case .refuse(let status, let text):
            return refuse(status, text, correlation: correlation)
        case .accept(let accepted):
            phase = .admitting
            negotiated = accepted
            helloCorrelation = correlation
            noteRequest(correlation)
            role = hello.role
            return .checkCredential(hello, correlation: correlation)
        }
    }

    /// The service admitted the peer: HELLO_OK goes out and the negotiated values take
    /// effect ([5.2-7]). Nil when the session is not waiting for admission.
    public mutating func admit() -> SessionAction? {
        guard phase == .admitting, let accepted = negotiated else { return nil }
        phase = .open
        return .send(.helloOK(accepted), correlation: helloCorrelation)
    }

    /// The service refused the credential: ERROR, then close ([5.1-3], [4.2-4]).
    public mutating func refuse(_ status: Status, _ text: String) -> SessionAction {
        guard phase == .admitting else { return .none }
        return refuse(status, text, correlation: helloCorrelation)
    }

    private mutating func refuse(_ status: Status, _ text: String, correlation: UInt32) -> SessionAction {
        phase = .closed
        negotiated = nil
        role = nil
        return .sendAndClose(.error(ErrorReply(status: status, message: text)), correlation: correlation)
    }

    mutating func noteRequest(_ correlation: UInt32) {
        lastRequestCorrelation = max(lastRequestCorrelation, correlation)
    }

    /// The service answered one of the requests `.serve` handed it.
    public mutating func answered(now: Int64) {
        if inflight > 0 { inflight -= 1 }
        lastSentAt = now
    }

    /// Graceful shutdown ([5.5-1]): GOAWAY SHUTTING_DOWN naming the last request received;
    /// requests after it are not carried out. Nil once closed or already draining.
    public mutating func beginDrain(reason: String) -> SessionAction {
        switch phase {
        case .open:
            phase = .draining
            return .send(.goaway(Goaway(status: .shuttingDown, lastCorrelation: lastRequestCorrelation, message: reason)), correlation: 0)
        case .handshaking, .admitting:
            return fatal(.shuttingDown, reason)
        case .draining, .closed:
            return .none
        }
    }

    /// Draining and every served request answered: the connection may close.
    public var isDrained: Bool { phase == .closed || (phase == .draining && inflight == 0) }

    /// The server decided to end the connection with a fatal status (REPLACED,
    /// SLOW_CONSUMER): GOAWAY, then close.
    public mutating func goaway(_ status: Status, _ text: String) -> SessionAction {
        guard phase != .closed else { return .none }
        return fatal(status, text)
    }
}
