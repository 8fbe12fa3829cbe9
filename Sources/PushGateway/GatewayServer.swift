import Logging
import PushEventLoop
import PushSecurity
import PushService
import PushWire

/// The gateway as a network service: `ServiceHost` runs the connection lifecycle, this
/// routes pushes through `GatewayLogic`. Loop-confined.
public final class GatewayServer: ServiceHandler {
    public let host: ServiceHost
    public let logic: GatewayLogic
    private let providerKey: SecretKey
    private let wallClock: () -> UInt64

    public var hasPendingWork: Bool { false }

    public init(host: ServiceHost, logic: GatewayLogic, providerKey: SecretKey, wallClock: @escaping () -> UInt64) {
        self.host = host
        self.logic = logic
        self.providerKey = providerKey
        self.wallClock = wallClock
        host.handler = self
    }

    public func admit(_ hello: Hello, peer: ServicePeer) -> (Status, String)? {
        switch hello.role {
        case .provider:
            guard let credential = hello.credential else { return (.badRequest, "a provider must send its credential") }
            do {
                try ProviderCredential.verify(credential, providerKey: providerKey, nowMs: wallClock())
                return nil
            } catch {
                return (.badCredentials, "provider credential refused")
            }
        case .device:
            guard hello.credential != nil else { return (.badRequest, "a device must send its registration") }
            switch logic.verifyRegistration(hello.credential) {
            case .success(let registration):
                peer.context = PendingDevice(registration: registration)
                return nil
            case .failure(let error):
                host.logger.info("registration refused", metadata: ["peer": "\(peer.peerHost)", "reason": "\(error)"])
                return (.badCredentials, "registration refused")
            }
        }
    }

    public func admitted(_ peer: ServicePeer) {
        logic.metrics.connections.increment()
        guard let pending = peer.context as? PendingDevice else { return }
        let device = DeviceConnection(host: host, peer: peer)
        device.record = logic.connect(pending.registration, link: device)
        peer.context = device
        logic.deliverBacklog(device.record!)
    }

    public func serve(_ message: Message, correlation: UInt32, peer: ServicePeer) {
        switch (message, peer.role) {
        case (.push(let push), .provider?):
            guard push.target != nil else {
                host.send(.error(ErrorReply(status: .badRequest, message: "PUSH needs a target")), correlation: correlation, to: peer)
                return
            }
            host.send(.pushAck(logic.push(push)), correlation: correlation, to: peer)
        // Role before service ([4.1-5]): what a role may never send is FORBIDDEN here too ([4.1-3]).
        case (.push, _), (.store, .device?), (.recall, .device?), (.status, .device?),
             (.login, .provider?), (.fetch, .provider?), (.sync, .provider?), (.ack, .provider?):
            host.send(.error(ErrorReply(status: .forbidden, message: "\(message.type) is not allowed for a \(peer.role.map { "\($0)" } ?? "peer")")),
                      correlation: correlation, to: peer)
        default:
            host.send(.error(ErrorReply(status: .badRequest, message: "the gateway does not serve \(message.type)")), correlation: correlation, to: peer)
        }
    }

    public func received(_ reply: Message, correlation: UInt32, peer: ServicePeer) {
        guard case .deliveryAck = reply, let device = peer.context as? DeviceConnection, let record = device.record else { return }
        logic.deliveryAcknowledged(record, correlation: correlation)
    }

    public func closed(_ peer: ServicePeer, reason: CloseReason) {
        logic.metrics.connections.decrement()
        if reason == .slowConsumer { logic.metrics.slowConsumersCut.increment() }
        guard let device = peer.context as? DeviceConnection, let record = device.record else { return }
        logic.disconnect(record, link: device)
        host.logger.debug("device disconnected", metadata: ["reason": "\(reason)"])
    }
}

/// A device between HELLO's check and HELLO_OK.
private final class PendingDevice {
    let registration: Registration
    init(registration: Registration) { self.registration = registration }
}

/// A connected device: the socket side of `DeviceLink`.
private final class DeviceConnection: DeviceLink {
    unowned let host: ServiceHost
    unowned let peer: ServicePeer
    /// Loop-confined and read for every DELIVERY_ACK, so not dynamically checked.
    @exclusivity(unchecked) var record: DeviceRecord?

    init(host: ServiceHost, peer: ServicePeer) {
        self.host = host
        self.peer = peer
    }

    func write(_ frame: [UInt8]) -> Bool {
        peer.connection.isOpen && host.sendEncoded(frame, to: peer)
    }

    func send(_ message: Message) -> Bool {
        peer.connection.isOpen && host.send(message, correlation: 0, to: peer)
    }

    func replaced() {
        host.goaway(peer, .replaced, "a newer connection for this device took over")
    }
}
