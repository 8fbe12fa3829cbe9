import Testing
import PushSession
import PushWire

/// The server's rules, driven by events alone: no sockets, a clock moved by hand.
@Suite("PeerSession, server side")
struct ServerSessionTests {
    static func limits(inflight: UInt32 = 4, keepalive: UInt32 = 10_000) -> ServiceLimits {
        var limits = ServiceLimits(name: "test-store", served: [.store, .fetch, .login, .sync, .ack])
        limits.maxInflight = inflight
        limits.keepaliveMs = keepalive
        limits.timeouts = SessionTimeouts(handshakeMs: 5_000, frameMs: 3_000)
        return limits
    }

    static func server(full: Bool = false, inflight: UInt32 = 4, keepalive: UInt32 = 10_000) -> SessionHarness<String> {
        SessionHarness(.server(limits(inflight: inflight, keepalive: keepalive), overConnectionLimit: full))
    }

    /// A server session past HELLO_OK for a peer of this role.
    static func open(_ role: PeerRole, inflight: UInt32 = 4, keepalive: UInt32 = 10_000) -> SessionHarness<String> {
        var harness = server(inflight: inflight, keepalive: keepalive)
        guard case .checkCredential = harness.receive(.hello(Hello(role: role)), correlation: 1) else { return harness }
        _ = harness.session.admit("peer")
        return harness
    }

    @Test("[5.1-2] a frame other than HELLO first is GOAWAY HELLO_REQUIRED with last_correlation 0, then close")
    func helloRequired() {
        var harness = Self.server()
        let action = harness.receive(.ping, correlation: 7)
        #expect(action == .sendAndClose(.goaway(Goaway(status: .helloRequired, lastCorrelation: 0, message: "the first frame must be HELLO")), correlation: 0))
        #expect(harness.session.phase == .closed)
        #expect(harness.receive(.ping, correlation: 8) == .none)
    }

    @Test("[5.1-2] a malformed non-HELLO frame first is HELLO_REQUIRED too")
    func malformedFirstFrame() {
        var harness = Self.server()
        let action = harness.receive(type: MessageType.store.rawValue, correlation: 3, body: [0xFF])
        #expect(action.status == .helloRequired && action.closes)
    }

    @Test("[5.1-3] a malformed HELLO is answered ERROR with the codec's status, then close")
    func malformedHello() {
        var harness = Self.server()
        let action = harness.receive(type: MessageType.hello.rawValue, correlation: 1, body: [])
        guard case .sendAndClose(.error(let error), let correlation) = action else { Issue.record("got \(action)"); return }
        #expect(correlation == 1 && error.status == .badRequest)
    }

    @Test("[5.2-1] an unsupported version range is GOAWAY UNSUPPORTED_VERSION")
    func unsupportedVersion() {
        var harness = Self.server()
        let action = harness.receive(.hello(Hello(role: .device, versionMin: 2, versionMax: 2)), correlation: 1)
        #expect(action.status == .unsupportedVersion && action.closes)
    }

    @Test("[5.1-3] BUSY at the connection limit is ERROR, then close")
    func connectionLimit() {
        var harness = Self.server(full: true)
        let action = harness.receive(.hello(Hello(role: .device)), correlation: 1)
        #expect(action == .sendAndClose(.error(ErrorReply(status: .busy, message: "the server is at its connection limit")), correlation: 1))
    }

    @Test("[5.2-7] HELLO_OK goes out only once the service admits the peer, and then the limits apply")
    func admission() {
        var harness = Self.server()
        guard case .checkCredential(let hello, let correlation) = harness.receive(.hello(Hello(role: .provider, maxInflight: 2)), correlation: 9) else {
            Issue.record("no credential check")
            return
        }
        #expect(hello.role == .provider && correlation == 9)
        #expect(harness.session.phase == .admitting)
        let action = harness.session.admit("state")
        guard case .send(.helloOK(let accepted), 9) = action else { Issue.record("got \(action)"); return }
        #expect(accepted.maxInflight == 2)
        #expect(harness.session.state == "state" && harness.session.phase == .open && harness.session.role == .provider)
        // [4.4-1] HELLO was processed: a GOAWAY now names it.
        #expect(harness.session.lastRequestCorrelation == 9)
    }

    @Test("[4.2-4] a refused credential is ERROR on HELLO's correlation, then close")
    func refusedCredential() {
        var harness = Self.server()
        _ = harness.receive(.hello(Hello(role: .provider)), correlation: 4)
        #expect(harness.session.refuse(.badCredentials, "no") == .sendAndClose(.error(ErrorReply(status: .badCredentials, message: "no")), correlation: 4))
        #expect(harness.session.phase == .closed && harness.session.role == nil)
    }

    @Test("[5.1-4] a second HELLO is BAD_REQUEST and changes nothing")
    func secondHello() {
        var harness = Self.open(.device)
        let action = harness.receive(.hello(Hello(role: .provider)), correlation: 2)
        #expect(action.status == .badRequest && !action.closes)
        #expect(harness.session.role == .device && harness.session.phase == .open)
    }

    @Test("[4.3-1] PING is answered PONG with its correlation, and holds no in-flight slot")
    func ping() {
        var harness = Self.open(.device, inflight: 1)
        #expect(harness.receive(.ping, correlation: 5) == .send(.pong, correlation: 5))
        #expect(harness.session.inflight == 0)
    }

    @Test("[4.1-3] [4.1-5] role before service: a device's STORE is FORBIDDEN, a provider's PUSH at the store BAD_REQUEST")
    func roleThenService() {
        var device = Self.open(.device)
        #expect(device.receive(.store(StoreRequest(user: "u", payload: [1])), correlation: 2).status == .forbidden)
        #expect(device.receive(.push(Push(target: .device("d"), id: Array(repeating: 1, count: 16))), correlation: 3).status == .forbidden)
        var provider = Self.open(.provider)
        #expect(provider.receive(.fetch(Fetch(id: PayloadID(high: 1, low: 1), token: [1])), correlation: 2).status == .forbidden)
        #expect(provider.receive(.push(Push(target: .device("d"), id: Array(repeating: 1, count: 16))), correlation: 3).status == .badRequest)
        #expect(provider.session.inflight == 0)
    }

    @Test("[5.3-4] a request over max_inflight is BUSY; an answer frees its slot")
    func maxInflight() {
        var harness = Self.open(.provider, inflight: 2)
        let store = Message.store(StoreRequest(user: "u", payload: [1]))
        #expect(harness.receive(store, correlation: 2) == .serve(store, correlation: 2))
        #expect(harness.receive(store, correlation: 3) == .serve(store, correlation: 3))
        #expect(harness.receive(store, correlation: 4).status == .busy)
        harness.session.answered(now: harness.now)
        #expect(harness.receive(store, correlation: 5) == .serve(store, correlation: 5))
    }

    @Test("[5.6-2] a malformed request is ERROR on its correlation and the connection stays open")
    func malformedRequest() {
        var harness = Self.open(.provider)
        let action = harness.receive(type: MessageType.store.rawValue, correlation: 6, body: [0xFF, 0xFF])
        guard case .send(.error, 6) = action else { Issue.record("got \(action)"); return }
        #expect(harness.session.phase == .open && harness.session.lastRequestCorrelation == 6)
    }

    @Test("[5.6-2] an unknown type is ERROR UNKNOWN_TYPE with the frame's correlation")
    func unknownType() {
        var harness = Self.open(.provider)
        #expect(harness.receive(type: 0x7E, correlation: 11, body: []).status == .unknownType)
    }

    @Test("[5.6-3] a malformed reply or one-way message is never answered; a malformed GOAWAY still closes")
    func malformedOneWay() {
        var harness = Self.open(.device)
        #expect(harness.receive(type: MessageType.deliveryAck.rawValue, correlation: 1, body: [0xFF]) == .none)
        #expect(harness.receive(type: MessageType.goaway.rawValue, correlation: 0, body: [0xFF]) == .close)
    }

    @Test("DELIVERY_ACK goes to the service as a one-way message; GOAWAY from the peer closes")
    func oneWay() {
        var harness = Self.open(.device)
        let ack = Message.deliveryAck(DeliveryAck(id: Array(repeating: 2, count: 16)))
        #expect(harness.receive(ack, correlation: 3) == .deliver(ack, correlation: 3))
        #expect(harness.receive(.goaway(Goaway(status: .shuttingDown, lastCorrelation: 0)), correlation: 0) == .close)
    }

    @Test("[5.6-1] a framing error is GOAWAY with its status and the last request's correlation")
    func framingError() {
        var harness = Self.open(.provider)
        _ = harness.receive(.ping, correlation: 41)
        let action = harness.session.framingError(.frameTooLarge(length: 1 << 30, max: 65_536))
        guard case .sendAndClose(.goaway(let goaway), 0) = action else { Issue.record("got \(action)"); return }
        #expect(goaway.status == .frameTooLarge && goaway.lastCorrelation == 41)
    }

    @Test("the handshake deadline closes a peer that never completes HELLO, however much it trickles")
    func handshakeDeadline() {
        var harness = Self.server()
        #expect(harness.advance(4_000) == .none)
        harness.lastReceivedAt = harness.now  // a byte arrived: no help
        let action = harness.advance(1_000)
        #expect(action.status == .timeout && action.closes)
    }

    @Test("a frame that has started must complete within the frame deadline")
    func frameDeadline() {
        var harness = Self.open(.device)
        harness.partialFrameSince = harness.now
        #expect(harness.advance(2_000) == .none)
        harness.lastReceivedAt = harness.now
        #expect(harness.advance(1_000).status == .timeout)
    }

    @Test("[5.4-1] a PING after keepalive_ms without sending; [5.4-2] GOAWAY TIMEOUT after 1.5 x keepalive of silence")
    func keepalive() {
        var harness = Self.open(.device, keepalive: 1_000)
        #expect(harness.advance(999) == .none)
        guard case .send(.ping, _) = harness.advance(1) else { Issue.record("no PING"); return }
        #expect(harness.advance(400) == .none)
        harness.session.sent(now: harness.now)
        let timeout = harness.advance(100)
        #expect(timeout.status == .timeout && timeout.closes)
    }

    @Test("[5.4-3] before HELLO_OK the default keepalive of 30 s applies")
    func keepaliveBeforeHello() {
        var limits = Self.limits()
        limits.timeouts.handshakeMs = 120_000
        var harness = SessionHarness<String>(.server(limits, overConnectionLimit: false))
        #expect(harness.advance(44_999) == .none)
        #expect(harness.advance(1).status == .timeout)
    }

    @Test("[5.2-5] keepalive 0 turns PING and the silence timeout off")
    func keepaliveOff() {
        var harness = Self.open(.device, keepalive: 0)
        #expect(harness.advance(3_600_000) == .none)
    }

    @Test("[5.5-1] a drain sends GOAWAY SHUTTING_DOWN with the last request, takes nothing new, and ends when owed replies are sent")
    func drain() {
        var harness = Self.open(.provider)
        let store = Message.store(StoreRequest(user: "u", payload: [1]))
        _ = harness.receive(store, correlation: 3)
        let action = harness.session.beginDrain(reason: "test-store shutting down")
        #expect(action == .send(.goaway(Goaway(status: .shuttingDown, lastCorrelation: 3, message: "test-store shutting down")), correlation: 0))
        #expect(!harness.session.isDrained)
        #expect(harness.receive(store, correlation: 4) == .none)
        #expect(harness.receive(.ping, correlation: 5) == .send(.pong, correlation: 5))
        harness.session.answered(now: harness.now)
        #expect(harness.session.isDrained)
        #expect(harness.session.beginDrain(reason: "again") == .none)
    }

    @Test("[5.5-3] [5.5-4] the server's own GOAWAY (REPLACED, SLOW_CONSUMER) closes once")
    func serverGoaway() {
        var harness = Self.open(.device)
        #expect(harness.session.goaway(.replaced, "newer").status == .replaced)
        #expect(harness.session.goaway(.replaced, "newer") == .none)
    }

    @Test("nextDeadline names the earliest timer a driver must arm")
    func nextDeadline() {
        let harness = Self.server()
        #expect(harness.session.nextDeadline(lastReceivedAt: 1_000, partialFrameSince: nil) == 6_000)
        #expect(harness.session.nextDeadline(lastReceivedAt: 1_000, partialFrameSince: 1_500) == 4_500)
    }
}
