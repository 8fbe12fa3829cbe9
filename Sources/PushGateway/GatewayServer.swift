import Logging
import PushClock
import PushEventLoop
import PushSecurity
import PushService
import PushSession
import PushWire

/// What the gateway keeps per admitted peer.
public enum GatewayPeer {
    case provider
    /// A device; its record is set once it is connected to the routing, right after
    /// HELLO_OK. The peer itself is the device's `DeviceLink` (see the extension below).
    case device(DeviceRecord?)
}

/// The gateway as a network service: `ServiceHost` runs the connection rules, this
/// routes pushes through `GatewayLogic`. Loop-confined.
public final class GatewayServer: ServiceHandler {
    public typealias Peer = ServicePeer<GatewayServer>
    /// Set once in `init`; the server owns its host.
    private(set) var host: ServiceHost<GatewayServer>!
    public let logic: GatewayLogic
    /// The cluster this gateway is a node of, if any (`--cluster`).
    var cluster: GatewayCluster? {
        didSet { cluster?.server = self }
    }
    /// This loop's part in a gateway of several loops, if it has them.
    var loopForwarding: LoopForwarding?
    /// The parts of the share being routed that go elsewhere (`.forward`), in the order
    /// decided: carried out by `routeShare` once the logic's decisions for the devices here
    /// are, with the tally they join. Nothing about the share is kept while it is decided:
    /// the push, the tally and its completion (the provider's peer) stay on the stack.
    /// Unchecked: on a gateway of two loops (`bench push`, 22,000 minus 2,000 pushes,
    /// callgrind, release) the checks cost one 77-instruction `swift_beginAccess` per push,
    /// 1.1 % of its ~7,000-instruction path (serve, the other loop's share, DELIVERY_ACK).
    @exclusivity(unchecked) private var forwards: [PushDestination] = []
    private let providerCredentials: HelloCredential
    /// Provider credentials accepted within their window, each accepted once ([7.1-5]),
    /// whichever of the process's loops sees them.
    private let replays: CredentialReplayGuard
    private let wallClock: () -> UInt64
    /// The registration of the device `admit` just admitted, for `admitted`, which the
    /// host calls right after it: kept here rather than in every device's peer state.
    private var admittedRegistration: Registration?
    /// Device HELLOs held until the registry hears of their enrolment ([7.4-8]).
    var heldHellos: [HeldHello] = []
    var heldHelloTimer: LoopTimer?
    /// Whether `carryOut` is running: a connection that closes meanwhile is reported to the
    /// logic once it is done, never from inside it.
    /// Unchecked: without it `carryOut` checks these two about 6 times per push (460
    /// instructions, 9 % of the push path; measured as at `DeviceRecord`).
    @exclusivity(unchecked) private var carryingOut = false
    @exclusivity(unchecked) private var closedWhileCarryingOut: [Peer] = []

    /// Requests the gateway serves ([4.1-4]).
    public static let served: Set<MessageType> = [.push]

    /// - Parameter admission: connection caps shared with the process's other loops, if any.
    public init(loop: EventLoop, limits: ServiceLimits, logger: Logger, logic: GatewayLogic, providerKey: SecretKey,
                wallClock: @escaping () -> UInt64, admission: AdmissionGate? = nil,
                replays: CredentialReplayGuard = CredentialReplayGuard()) {
        self.replays = replays
        self.logic = logic
        providerCredentials = HelloCredential.provider(providerKey)
        self.wallClock = wallClock
        host = ServiceHost(loop: loop, limits: limits, logger: logger, handler: self, admission: admission)
        // The stall rule is checked on the host's sweep, which must come often enough for it.
        host.serviceDeadlineMs = logic.settings.outputStallMs
        logic.actionsGathered = { [unowned self] in carryOutGathered() }
    }

    public func admit(_ hello: Hello, peer: Peer) -> Admission<GatewayPeer> {
        switch hello.role {
        case .provider:
            // Until the registry is loaded the gateway cannot tell which offline devices a
            // PUSH should be queued for: it would answer queued 0 for pushes it should keep.
            // BUSY makes the provider retry ([4.16-12]).
            // On several loops a PUSH may be for a device whose home loop has not loaded
            // its part yet: every loop's must be in.
            guard loopForwarding.map({ $0.router.allRegistriesLoaded }) ?? logic.isRegistryReady else {
                return .refuse(.busy, "the gateway is loading its device registry; retry", logDetail: "provider: registry not loaded yet")
            }
            let now = wallClock()
            switch providerCredentials.check(hello, for: .gateway, nowMs: now, replays: replays) {
            case .admit: return .admit(.provider)
            case .refuse(let status, let reply, let reason):
                if let refusal = providerRefusal(hello.credential, status: status, nowMs: now) { logic.metrics.credentialRefused(refusal) }
                return .refuse(status, reply, logDetail: reason)
            }
        case .gateway:
            return .refuse(.badRequest, "the gateway serves devices and providers, not gateways")
        case .device:
            // Checked on the device's home loop, where its state lives: this loop only reads
            // the id it claims (a forged one is refused there).
            if let loopForwarding, let credential = hello.credential,
               let deviceID = Registration.readUnverified(credential)?.deviceID,
               case let home = loopForwarding.placement.home(of: deviceID), home != loopForwarding.placement.index {
                let router = loopForwarding.router
                return .handOff { handoff in
                    router.withServer(home) { server in server.adopt(handoff) }
                }
            }
            switch logic.admitDevice(hello.credential, mayWait: true) {
            case .unheard:
                hold(peer, credential: hello.credential ?? [])
                return .wait
            case let decided:
                return admission(decided)
            }
        }
    }

    /// A device's HELLO decided: admitted (its registration kept for `admitted`) or refused.
    func admission(_ decided: DeviceAdmission) -> Admission<GatewayPeer> {
        switch decided {
        case .admit(let registration):
            admittedRegistration = registration
            return .admit(.device(nil))
        case .refuse(let status, let reply, let reason):
            // The host logs the refusal at info, with the reason.
            return .refuse(status, reply, logDetail: reason)
        case .unheard:
            return .wait
        }
    }

    /// Why `check` refused a provider's credential, for the metrics: the MAC is checked
    /// again (it is cheap) to tell a bad or expired one from a replay.
    private func providerRefusal(_ credential: [UInt8]?, status: Status, nowMs: UInt64) -> CredentialRefusal? {
        guard let credential else { return .providerMissing }
        guard status == .badCredentials else { return nil }
        do {
            _ = try providerCredentials.verify(credential, for: .gateway, nowMs: nowMs)
            return .providerReplayed
        } catch {
            return error == .expired ? .providerExpired : .providerBad
        }
    }

    public func admitted(_ peer: Peer) {
        let registration = admittedRegistration
        admittedRegistration = nil
        // Closed already if HELLO_OK could not be written: nothing to route to.
        guard case .device? = peer.state, let registration, peer.connection.isOpen else { return }
        let record = logic.connect(registration, link: peer)
        peer.session.state = .device(record)
        logic.deliverBacklog(record)
        carryOut()
        cluster?.deviceArrived(record)
    }

    public func serve(_ message: Message, correlation: UInt32, peer: Peer) {
        // The session admits only PUSH from a provider here ([4.1-3], [4.1-4]).
        guard case .push(let push) = message else { return }
        let startNs = Clocks.monotonicNanoseconds()
        guard push.target != nil else {
            host.respond(.error(ErrorReply(status: .badRequest, message: "PUSH needs a target")), correlation: correlation, to: peer)
            return
        }
        // Only a gateway that may send parts elsewhere (other loops, a cluster) needs a share.
        guard loopForwarding != nil || cluster != nil else {
            let ack = logic.push(push)
            carryOut()
            return answer(push: ack, unreached: 0, correlation: correlation, peer: peer, startNs: startNs)
        }
        let share = routeShare(push, tally: { PushTally(.provider(self, peer, correlation: correlation, startNs: startNs)) }) {
            logic.push(push)
        }
        // Nothing went elsewhere: the counts are all here, and no tally was made.
        guard let tally = share.tally else {
            return answer(push: share.ack, unreached: 0, correlation: correlation, peer: peer, startNs: startNs)
        }
        tally.add(share.ack)
        tally.seal()
    }

    /// Has the logic decide a share of a push (`decide` calls into it) and carries out what
    /// it decided. The parts it sends elsewhere (`.forward`) join the tally `makeTally`
    /// makes, only if there are any. Returns the counts decided here and that tally, if one
    /// was made, which the caller adds them to and seals.
    func routeShare(_ push: Push? = nil, tally makeTally: () -> PushTally,
                    _ decide: () -> PushAck) -> (ack: PushAck, tally: PushTally?) {
        // Left by a call outside a share, which has nothing to count them into.
        if !forwards.isEmpty { forwards.removeAll(keepingCapacity: true) }
        let ack = decide()
        carryOut()
        guard !forwards.isEmpty else { return (ack, nil) }
        let tally = makeTally()
        forwardParts(of: push, into: tally)
        return (ack, tally)
    }

    /// `routeShare` for parts that join `tally`, which exists already.
    func routeShare(into tally: PushTally, _ decide: () -> PushAck) {
        if !forwards.isEmpty { forwards.removeAll(keepingCapacity: true) }
        tally.add(decide())
        carryOut()
        forwardParts(of: nil, into: tally)
    }

    /// Carries out the parts of a share that go elsewhere; their counts join `tally`. Only a
    /// provider's push (`push`) goes to other loops.
    private func forwardParts(of push: Push?, into tally: PushTally) {
        // By index, and emptied after, so that the buffer keeps its capacity for the next share.
        var next = 0
        while next < forwards.count {
            let destination = forwards[next]
            next += 1
            switch destination {
            case .loop(let index):
                guard let loopForwarding, let push else { continue }
                loopForwarding.forward(push, to: index, tally: tally)
            case .node(let node, let push, let devices):
                cluster?.forward(push, to: devices, at: node, tally: tally)
            case .queue(let push, let device):
                cluster?.queue(push, for: device, tally: tally)
            case .unreachable(let devices):
                cluster?.unreachable(devices, tally: tally)
            }
        }
        forwards.removeAll(keepingCapacity: true)
    }

    /// PUSH_ACK, or BUSY when some matching devices were `unreached`: only the cluster
    /// could reach them, and it could not be reached. The devices that could be reached
    /// have the push; the provider retries, as for any BUSY, and a store forwarding a SEND
    /// keeps its push until a gateway answers PUSH_ACK ([4.13-13], [4.17-4]).
    func answer(push ack: PushAck, unreached: UInt32, correlation: UInt32, peer: Peer, startNs: UInt64) {
        if unreached > 0 {
            let text = "\(unreached) of the devices this push matched are reachable only through the gateway cluster, "
                + "which this node cannot reach now (written \(ack.written), queued \(ack.queued)); retry"
            host.respond(.error(ErrorReply(status: .busy, message: text)), correlation: correlation, to: peer)
        } else {
            host.respond(ack, correlation: correlation, to: peer)
        }
        logic.metrics.pushDuration.observe(since: startNs)
    }

    /// A connection another loop accepted, for a device whose home is this loop: served
    /// from its HELLO on, as if accepted here. Refused (closed) while draining.
    func adopt(_ handoff: ConnectionHandoff) {
        guard !host.isDraining else { return }
        _ = Connection.adopt(handoff, on: host.loop) { [host] connection in host.accept(connection) }
    }

    public func received(_ message: Message, correlation: UInt32, peer: Peer) {
        guard case .deliveryAck(let ack) = message, case .device(let record?)? = peer.state else { return }
        logic.deliveryAcknowledged(record, correlation: correlation, id: ack.id)
        carryOut()
    }

    /// The host's periodic sweep: the stall rule ([5.5-7]) for a connected device.
    public func swept(_ peer: Peer, nowMs: Int64) {
        guard case .device(let record?)? = peer.state else { return }
        logic.checkOutputStall(record, nowNs: UInt64(max(0, nowMs)) &* 1_000_000)
        carryOut()
    }

    public func closed(_ peer: Peer, reason: CloseReason) {
        // The connection's own cut; one the logic decided is counted at `.cutOff`.
        if reason == .slowConsumer { logic.metrics.slowConsumersCut.increment() }
        guard case .device(let record?)? = peer.state else { return }
        host.logger.debug("device disconnected", metadata: ["reason": "\(reason)"])
        if carryingOut { return closedWhileCarryingOut.append(peer) }
        linkClosed(record, peer: peer)
    }

    private func linkClosed(_ record: DeviceRecord, peer: Peer) {
        if logic.disconnect(record, link: peer) { cluster?.deviceLeft(record) }
        carryOut()
    }

    // MARK: carrying out the logic's actions

    /// Carries out what the logic decided; to be called after every call into the logic
    /// that may decide actions. A connection that closes while its actions are carried out
    /// (one the logic did not foresee, as a failed allocation) is reported afterwards.
    func carryOut() {
        guard !carryingOut, !logic.actions.isEmpty || !closedWhileCarryingOut.isEmpty else { return }
        carryingOut = true
        logic.carryOut { perform($0) }
        carryingOut = false
        while let peer = closedWhileCarryingOut.popLast() {
            guard case .device(let record?)? = peer.state else { continue }
            linkClosed(record, peer: peer)
        }
    }

    /// The logic is still deciding (a fan-out) and has gathered a batch: its frames go out
    /// now, so the first devices need not wait for the last to be decided. A connection
    /// that closes meanwhile is reported to the logic only by the `carryOut` that follows
    /// the decision, never into it.
    private func carryOutGathered() {
        guard !carryingOut else { return }
        carryingOut = true
        logic.carryOut { perform($0) }
        carryingOut = false
    }

    private func perform(_ action: consuming GatewayAction) {
        switch consume action {
        case .push(let link, let frame):
            guard let peer = Self.peer(link) else { return }
            host.sendEncoded(frame, to: peer)
        case .missed(let link, let missed):
            guard let peer = Self.peer(link) else { return }
            host.send(.missed(missed), correlation: 0, to: peer)
        case .replaced(let link):
            guard let peer = Self.peer(link) else { return }
            host.goaway(peer, .replaced, "a newer connection for this device took over")
        case .revoked(let link):
            guard let peer = Self.peer(link) else { return }
            var metadata: Logger.Metadata = ["peer": "\(peer.peerHost)"]
            if case .device(let record?)? = peer.state { metadata["device"] = "\(record.deviceID)" }
            host.logger.info("closing a device connection: its registration was revoked", metadata: metadata)
            host.goaway(peer, .revoked, "the registration of this device was revoked")
        case .cutOff(let link):
            guard let peer = Self.peer(link) else { return }
            // The logic let the device go already; its queue leaves the node as for any close.
            // Counted here: the close comes later, and may be a flush timeout.
            logic.metrics.slowConsumersCut.increment()
            host.cutOff(peer, "the device left more than \(host.maxOutputBytes) bytes unread")
            if case .device(let record?)? = peer.state { cluster?.deviceLeft(record) }
        case .stalled(let link):
            guard let peer = Self.peer(link) else { return }
            logic.metrics.slowConsumersCut.increment()
            var metadata: Logger.Metadata = ["peer": "\(peer.peerHost)"]
            if case .device(let record?)? = peer.state { metadata["device"] = "\(record.deviceID)" }
            host.logger.info("closing a device connection: it has stopped reading", metadata: metadata)
            host.cutOff(peer, "the device took no byte of its output for \(logic.settings.outputStallMs) ms")
            if case .device(let record?)? = peer.state { cluster?.deviceLeft(record) }
        case .forward(to: let destination):
            // Carried out by `routeShare`, with the tally of the share.
            forwards.append(destination)
        }
    }

    /// Every link the logic holds is a device's peer (`admitted`). Checked by its exact
    /// class rather than with `as?`, whose dynamic cast cost a fan-out to 10,000 devices
    /// about 4 % more CPU per delivery.
    @inline(__always)
    private static func peer(_ link: DeviceLink) -> Peer? {
        let object = link as AnyObject
        guard ObjectIdentifier(type(of: object)) == ObjectIdentifier(Peer.self) else { return nil }
        return unsafeDowncast(object, to: Peer.self)
    }
}

/// A connected device: its peer is its `DeviceLink`, so a device connection costs no
/// object of its own (a gateway holds one per device).
extension ServicePeer: DeviceLink where Handler == GatewayServer {
    public var outputRoom: Int? {
        guard connection.acceptsWrites else { return nil }
        return connection.maxOutputBytes - connection.outputBufferedBytes
    }

    public var outputProgress: LinkOutput? {
        connection.outputProgress.map { LinkOutput(notTaken: $0.notTaken, taken: $0.taken) }
    }
}
