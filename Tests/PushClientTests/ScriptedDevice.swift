import Foundation
import PushClient
import PushClock
import PushEventLoop
import PushTestSupport
import PushWire

/// A store for device tests on a `ScriptedServer`: HELLO_OK, SYNC_OK listing `listed`,
/// FETCH_OK with `payloads` (NOT_FOUND for another id) and ACK_OK, unless `override`
/// answers a request first (returns true when it took the request, answered or not).
final class ScriptedStore {
    let server: ScriptedServer
    var payloads: [PayloadID: [UInt8]] = [:]
    var listed: [PayloadID] = []
    var maxInflight: UInt32 = 32
    var override: ((ScriptedServer.Peer, Message, UInt32) -> Bool)?

    init(loop: EventLoop) throws {
        server = try ScriptedServer(loop: loop)
        server.onMessage = { [unowned self] peer, message, correlation in self.answer(peer, message, correlation) }
    }

    private func answer(_ peer: ScriptedServer.Peer, _ message: Message, _ correlation: UInt32) {
        if ScriptedServer.answerHandshake(peer, message, correlation, maxInflight: maxInflight) { return }
        if override?(peer, message, correlation) == true { return }
        switch message {
        case .sync:
            peer.send(.syncOK(SyncOK(ids: listed, cursor: 0, hasMore: false)), correlation: correlation)
        case .fetch(let fetch):
            if let payload = payloads[fetch.id] {
                let now = Clocks.wallMilliseconds()
                peer.send(.fetchOK(FetchOK(id: fetch.id, payload: payload, createdAt: now, expiresAt: now + 3_600_000)),
                          correlation: correlation)
            } else {
                peer.send(.error(ErrorReply(status: .notFound)), correlation: correlation)
            }
        case .ack(let ack):
            peer.send(.ackOK(AckOK(id: ack.id)), correlation: correlation)
        default:
            peer.send(.error(ErrorReply(status: .badRequest)), correlation: correlation)
        }
    }

    /// The ids of every FETCH (or ACK) received, in order, with the connection each came on.
    func requests(_ type: MessageType) -> [(peer: Int, id: PayloadID, at: Int64)] {
        server.messages(type).compactMap { entry in
            switch entry.message {
            case .fetch(let fetch): (entry.peer, fetch.id, entry.at)
            case .ack(let ack): (entry.peer, ack.id, entry.at)
            default: nil
            }
        }
    }
}

/// A `DeviceClient` on the test's loop between a scripted gateway and a `ScriptedStore`, with
/// a state directory of its own (token file, shown ids) that a restart keeps.
final class ScriptedDeviceFixture {
    let loop: EventLoop
    let gateway: ScriptedServer
    let store: ScriptedStore
    let directory: String
    let registration: [UInt8]
    private(set) var device: DeviceClient?
    var shown: [DeviceNotification] = []
    var events: [DeviceEvent] = []
    static let token: [UInt8] = Array(repeating: 0xab, count: 16)

    init(withToken: Bool = true) throws {
        loop = try EventLoop()
        gateway = try ScriptedServer(loop: loop)
        gateway.onMessage = { peer, message, correlation in ScriptedServer.answerHandshake(peer, message, correlation) }
        store = try ScriptedStore(loop: loop)
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("scripted-device-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        registration = try TemporaryDeployment().registration("phone")
        if withToken { try writeToken() }
    }

    deinit {
        device?.stop()
        gateway.stop()
        store.server.stop()
        loop.shutdown()
        try? FileManager.default.removeItem(atPath: directory)
    }

    func writeToken() throws {
        try TokenStore(directory: directory).save(TokenStore.Saved(token: Self.token, expiresAt: Clocks.wallMilliseconds() + 3_600_000))
    }

    /// Starts the device (again, after `stop`, with the same state directory).
    func start() {
        let device = DeviceClient(loop: loop, gateway: gateway.endpoint, store: store.server.endpoint, registration: registration,
                                  deviceID: "phone", tokenStore: TokenStore(directory: directory),
                                  shownFile: ShownIDFile(directory: directory),
                                  genericFile: ShownIDFile(directory: directory, name: ShownIDFile.genericFileName))
        device.onNotification = { [unowned self] in self.shown.append($0) }
        device.onEvent = { [unowned self] in self.events.append($0) }
        self.device = device
        device.start()
    }

    func stop() {
        device?.stop()
        device = nil
    }

    /// The gateway connection that said HELLO last and is still open.
    var gatewayPeer: ScriptedServer.Peer? {
        gateway.peers.last { $0.isOpen && $0.received.contains { $0.message.type == .hello } }
    }

    /// Runs the loop until the device is connected to both (its first SYNC reached the store).
    func waitUntilConnected(syncs: Int = 1) -> Bool {
        loop.run(until: { self.gatewayPeer != nil && self.store.server.messages(.sync).count >= syncs }, timeoutSeconds: 10)
    }

    /// PUSH of `id` on the open gateway connection.
    func push(_ id: PayloadID, correlation: UInt32 = 0x2001) {
        gatewayPeer?.send(.push(Push(target: nil, id: id.bytes)), correlation: correlation)
    }

    func shown(_ id: PayloadID) -> [DeviceNotification.Content] { shown.filter { $0.id == id }.map(\.content) }

    static func id(_ byte: UInt8) -> PayloadID { PayloadID(high: UInt64(byte) << 56 | 0x1234, low: UInt64(byte)) }
}
