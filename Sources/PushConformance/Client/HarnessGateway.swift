import PushEventLoop
import PushService
import PushWire

/// The harness's gateway: admits the one device whose registration it was given, keeps
/// its newest connection, and sends what the case tells it to (PUSH, MISSED, PING, raw
/// bytes). It never pushes on its own: redelivery and queues are the case's to play.
final class HarnessGateway: ServiceHandler {
    typealias PeerState = Int
    typealias Peer = ServicePeer<HarnessGateway>

    unowned var server: HarnessServer<HarnessGateway>!
    let registration: [UInt8]
    /// Answer every HELLO with ERROR and this status (BUSY: a gateway still loading its
    /// registry, 4.16-12), then close.
    var refuseHello: Status?
    /// Hold HELLO_OK back this long after HELLO.
    var helloDelayMs: Int64 = 0
    /// Told of each device connection admitted.
    var onAdmitted: ((Peer) -> Void)?
    /// The newest admitted connection that is still open.
    private(set) var device: Peer?
    private var nextCorrelation: UInt32 = 0x0100_0000

    init(registration: [UInt8]) {
        self.registration = registration
    }

    func admit(_ hello: Hello, peer: Peer) -> Admission<Int> {
        if let refuseHello { return .refuse(refuseHello, "refused by the conformance harness") }
        guard hello.role == .device, hello.credential == registration else {
            return .refuse(.badCredentials, "not the registration the harness issued")
        }
        guard helloDelayMs > 0 else { return .admit(server.serial(peer)) }
        let serial = server.serial(peer)
        server.host.loop.schedule(after: .milliseconds(helloDelayMs)) { [weak self, weak peer] in
            guard let self, let peer else { return }
            self.server.host.decide(peer, .admit(serial))
        }
        return .wait
    }

    func admitted(_ peer: Peer) {
        device = peer
        onAdmitted?(peer)
    }

    func closed(_ peer: Peer, reason: CloseReason) {
        if device === peer { device = nil }
    }

    func serve(_ message: Message, correlation: UInt32, peer: Peer) {
        server.respond(.error(ErrorReply(status: .badRequest, message: "the harness's gateway serves no request")),
                       correlation: correlation, to: peer)
    }

    /// A fresh correlation id for a frame the gateway starts.
    func correlation() -> UInt32 {
        nextCorrelation += 1
        return nextCorrelation
    }

    /// PUSH of `id` to the device's connection; its correlation id, or nil with no device.
    @discardableResult
    func push(_ id: PayloadID, correlation chosen: UInt32? = nil) -> UInt32? {
        guard let device else { return nil }
        let correlation = chosen ?? correlation()
        server.send(.push(Push(target: nil, id: id.bytes)), correlation: correlation, to: device)
        return correlation
    }

    func send(_ message: Message, correlation: UInt32 = 0) {
        guard let device else { return }
        server.send(message, correlation: correlation, to: device)
    }

    func sendRaw(_ bytes: [UInt8]) {
        guard let device else { return }
        server.sendRaw(bytes, to: device)
    }
}
