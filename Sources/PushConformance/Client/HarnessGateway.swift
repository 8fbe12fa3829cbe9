import PushClock
import PushEventLoop
import PushSecurity
import PushService
import PushWire

/// The harness's gateway: admits the one device whose registration it was given, keeps
/// its newest connection, and sends what the case tells it to (PUSH, MISSED, PING, raw
/// bytes). It never pushes on its own: redelivery and queues are the case's to play. A
/// provider's PUSH is answered PUSH_ACK, as if the device were offline (queued 1), or as
/// the case's intercept says.
final class HarnessGateway: ServiceHandler {
    typealias PeerState = Int
    typealias Peer = ServicePeer<HarnessGateway>

    unowned var server: HarnessServer<HarnessGateway>!
    let registration: [UInt8]
    private let providerCredential: HelloCredential
    /// Consulted for every provider PUSH before the faithful PUSH_ACK.
    var intercept: ((HarnessRequest) -> HarnessAnswer)?
    /// The admitted provider connections, newest last.
    private(set) var providers: [Peer] = []
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

    init(registration: [UInt8], providerKey: SecretKey) {
        self.registration = registration
        providerCredential = HelloCredential.provider(providerKey)
    }

    func admit(_ hello: Hello, peer: Peer) -> Admission<Int> {
        if let refuseHello { return .refuse(refuseHello, "refused by the conformance harness") }
        if hello.role == .provider {
            return HarnessCredentials.admitProvider(hello, audience: .gateway, credential: providerCredential, serial: server.serial(peer))
        }
        guard hello.role == .device, hello.credential == registration else {
            return .refuse(.badCredentials, "not the registration the harness issued")
        }
        return server.admit(peer, afterMs: helloDelayMs)
    }

    func admitted(_ peer: Peer) {
        if peer.role == .provider { return providers.append(peer) }
        device = peer
        onAdmitted?(peer)
    }

    func closed(_ peer: Peer, reason: CloseReason) {
        if device === peer { device = nil }
        providers.removeAll { $0 === peer }
    }

    func serve(_ message: Message, correlation: UInt32, peer: Peer) {
        let request = HarnessRequest(message: message, correlation: correlation, connection: server.serial(peer))
        HarnessAnswer.carryOut(intercept?(request) ?? .faithful, request, server: server, peer: peer) { _ in
            .pushAck(PushAck(written: 0, queued: 1))
        }
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
