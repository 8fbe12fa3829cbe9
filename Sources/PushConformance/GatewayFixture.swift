import PushWire
import PushSession

/// What the gateway cases keep doing: devices under fresh registrations, a provider,
/// pushes and their acknowledgements.
struct GatewayFixture {
    let ctx: CaseContext
    let provider: WireSession
    /// A user name no other run shares, so routing by user sees only this case's devices.
    let user: String

    init(_ ctx: CaseContext) throws(CaseStop) {
        self.ctx = ctx
        provider = try ctx.gatewayProvider()
        user = ctx.unique("user")
    }

    func device(_ id: String, user: String? = nil, tags: [String] = [], receiveBufferBytes: Int32? = nil) throws(CaseStop) -> WireSession {
        try ctx.gatewayDevice(id, user: user ?? self.user, tags: tags, receiveBufferBytes: receiveBufferBytes)
    }

    /// Sends a PUSH and requires PUSH_ACK.
    @discardableResult
    func push(_ target: PushTarget, id: String, ttl: UInt32 = 60, priority: UInt8 = Push.defaultPriority,
              collapseKey: String? = nil, alert: Bool = false, user: String? = nil, once: Bool = false,
              via session: WireSession? = nil) throws(CaseStop) -> PushAck {
        let push = Push(target: target, id: Array(id.utf8), alert: alert, priority: priority, collapseKey: collapseKey, ttlSeconds: ttl,
                        user: user, once: once)
        let answer = try (session ?? provider).request(.push(push))
        guard case .pushAck(let ack) = answer else { throw .fail("PUSH to \(target) was answered \(describe(answer))") }
        return ack
    }

    /// The next PUSH a device receives, acknowledged with DELIVERY_ACK unless told not to.
    func nextPush(_ device: WireSession, acknowledge: Bool = true, _ what: String) throws(CaseStop) -> (correlation: UInt32, push: Push) {
        let (header, message) = try device.next(waitingFor: what)
        guard case .push(let push) = message else { throw .fail("\(what): the device got \(describe(message)), expected PUSH") }
        if acknowledge { try device.send(.deliveryAck(DeliveryAck(id: push.id)), correlation: header.correlation) }
        return (header.correlation, push)
    }

    func nextPushID(_ device: WireSession, acknowledge: Bool = true, _ what: String) throws(CaseStop) -> String {
        String(decoding: try nextPush(device, acknowledge: acknowledge, what).push.id, as: UTF8.self)
    }

    /// Takes a device offline and waits until the gateway has seen it go: the half-close
    /// makes the gateway read EOF and close its side, which is what the case waits for.
    func disconnect(_ device: WireSession) throws(CaseStop) {
        device.client.shutdownWrite()
        _ = try? device.expectClosed(within: 2_000, "the device half-closed")
        Pause.sleep(ms: 50)
    }
}
