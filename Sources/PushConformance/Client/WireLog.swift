import PushClock
import PushEventLoop
import PushWire

/// Which of the harness's two servers a client talked to.
public enum HarnessService: String, Sendable {
    case gateway
    case store
}

/// What the harness's servers saw of a client: every connection, every frame it sent
/// (decoded when it decodes), every frame the harness sent it, and every close, in order,
/// with times. Cases judge the client from this and from its stdout.
final class WireLog {
    struct Event {
        enum Kind {
            case opened
            /// A frame from the client: its header, the body, and the message when it decodes.
            case received(FrameHeader, body: [UInt8], Message?)
            /// Bytes from the client the framer refused.
            case unframed(WireError)
            /// A frame the harness wrote (type and correlation id).
            case sent(MessageType?, correlation: UInt32)
            case closed(CloseReason)
        }

        var atMs: Int64
        var service: HarnessService
        /// Numbered from 1 for each service, in the order accepted.
        var connection: Int
        var kind: Kind
    }

    private(set) var events: [Event] = []

    func record(_ service: HarnessService, _ connection: Int, _ kind: Event.Kind) {
        events.append(Event(atMs: Clocks.monotonicMilliseconds(), service: service, connection: connection, kind: kind))
    }

    /// A frame the client sent, with where and when.
    struct ReceivedFrame {
        var atMs: Int64
        var service: HarnessService
        var connection: Int
        var header: FrameHeader
        var body: [UInt8]
        var message: Message?
    }

    func received(from service: HarnessService? = nil) -> [ReceivedFrame] {
        events.compactMap { event in
            guard service == nil || event.service == service, case .received(let header, let body, let message) = event.kind else { return nil }
            return ReceivedFrame(atMs: event.atMs, service: event.service, connection: event.connection, header: header,
                                 body: body, message: message)
        }
    }

    /// The messages of one type the client sent to `service`.
    func messages(_ type: MessageType, to service: HarnessService) -> [ReceivedFrame] {
        received(from: service).filter { $0.header.type == type }
    }

    /// When each connection to `service` was opened, in order.
    func connectionTimes(_ service: HarnessService) -> [Int64] {
        events.filter { $0.service == service && { if case .opened = $0.kind { true } else { false } }($0) }.map(\.atMs)
    }

    func connectionCount(_ service: HarnessService) -> Int { connectionTimes(service).count }

    /// When the client's connection `connection` to `service` closed, if it has.
    func closedAt(_ service: HarnessService, connection: Int) -> Int64? {
        events.first { $0.service == service && $0.connection == connection && { if case .closed = $0.kind { true } else { false } }($0) }?.atMs
    }

    /// Framing errors the client's bytes caused.
    func unframed(_ service: HarnessService) -> [WireError] {
        events.compactMap { event in
            guard event.service == service, case .unframed(let error) = event.kind else { return nil }
            return error
        }
    }
}
