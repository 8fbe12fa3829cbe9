import PushSession
import PushWire

/// Feeds a session whole messages as frames, with a clock the test moves by hand.
struct SessionHarness<State> {
    var session: PeerSession<State>
    var now: Int64 = 1_000
    /// When bytes last came in; every frame counts as bytes.
    var lastReceivedAt: Int64 = 1_000
    var partialFrameSince: Int64?

    init(_ side: PeerSession<State>.Side) {
        session = PeerSession(side: side, now: 1_000)
    }

    mutating func receive(_ message: Message, correlation: UInt32) -> SessionAction {
        lastReceivedAt = now
        return Self.frame(message, correlation: correlation) { header, body in session.received(header, body: body) }
    }

    /// A frame with a raw body, for bodies the codec refuses.
    mutating func receive(type: UInt8, correlation: UInt32, body: [UInt8]) -> SessionAction {
        lastReceivedAt = now
        var bytes: [UInt8] = []
        FrameHeader(rawType: type, correlation: correlation, status: .ok, bodyLength: UInt32(body.count)).write(into: &bytes)
        bytes += body
        return Self.parse(bytes) { header, body in session.received(header, body: body) }
    }

    mutating func advance(_ ms: Int64) -> SessionAction {
        now += ms
        return session.timerFired(now: now, lastReceivedAt: lastReceivedAt, partialFrameSince: partialFrameSince)
    }

    static func frame(_ message: Message, correlation: UInt32, _ body: (FrameHeader, UnsafeRawBufferPointer) -> SessionAction) -> SessionAction {
        parse(message.encoded(correlation: correlation), body)
    }

    static func parse(_ bytes: [UInt8], _ body: (FrameHeader, UnsafeRawBufferPointer) -> SessionAction) -> SessionAction {
        bytes.withUnsafeBytes { raw in
            guard let header = try? FrameHeader.parse(UnsafeRawBufferPointer(rebasing: raw[0..<FrameHeader.size]), maxFrame: 1 << 24) else {
                return .none
            }
            return body(header, UnsafeRawBufferPointer(rebasing: raw[FrameHeader.size...]))
        }
    }
}

extension SessionAction {
    /// The status of the GOAWAY or ERROR this action writes, if it writes one.
    var status: Status? {
        switch self {
        case .send(.error(let error), _), .sendAndClose(.error(let error), _): error.status
        case .send(.goaway(let goaway), _), .sendAndClose(.goaway(let goaway), _): goaway.status
        default: nil
        }
    }

    var closes: Bool {
        switch self {
        case .sendAndClose, .close: true
        case .goaway(_, let close): close
        default: false
        }
    }
}
