import Testing
import PushSession
import PushWire

/// The client's rules, driven by events alone.
@Suite("PeerSession, client side")
struct ClientSessionTests {
    static func client() -> SessionHarness<Void> {
        SessionHarness(.client(SessionTimeouts(handshakeMs: 2_000, frameMs: 3_000)))
    }

    static func open(keepalive: UInt32 = 1_000) -> SessionHarness<Void> {
        var harness = client()
        _ = harness.session.start(Hello(role: .device), correlation: 1)
        _ = harness.receive(.helloOK(HelloOK(maxFrame: 65_536, keepaliveMs: keepalive, maxInflight: 8)), correlation: 1)
        return harness
    }

    @Test("[5.1-1] HELLO first; no requests until HELLO_OK")
    func helloFirst() {
        var harness = Self.client()
        #expect(harness.session.start(Hello(role: .device), correlation: 1) == .send(.hello(Hello(role: .device)), correlation: 1))
        #expect(!harness.session.acceptsRequests)
        let accepted = HelloOK(maxFrame: 4_096, keepaliveMs: 5_000, maxInflight: 3)
        #expect(harness.receive(.helloOK(accepted), correlation: 1) == .ready(accepted))
        #expect(harness.session.acceptsRequests && harness.session.negotiated == accepted)
    }

    @Test("[5.1-3] an ERROR or GOAWAY answering HELLO is a refusal")
    func refused() {
        var error = Self.client()
        _ = error.session.start(Hello(role: .provider), correlation: 1)
        #expect(error.receive(.error(ErrorReply(status: .badCredentials, message: "no")), correlation: 1) == .refused(.badCredentials, "no"))
        var goaway = Self.client()
        _ = goaway.session.start(Hello(role: .provider), correlation: 1)
        #expect(goaway.receive(.goaway(Goaway(status: .unsupportedVersion, lastCorrelation: 0)), correlation: 0) == .refused(.unsupportedVersion, nil))
        #expect(goaway.session.phase == .closed)
    }

    @Test("a HELLO_OK that never comes ends the connection at the handshake deadline")
    func handshakeDeadline() {
        var harness = Self.client()
        _ = harness.session.start(Hello(role: .device), correlation: 1)
        #expect(harness.advance(1_999) == .none)
        #expect(harness.advance(1).status == .timeout)
    }

    @Test("[4.3-1] the server's PING is answered; [5.4-1] [5.4-2] the client keeps the connection alive too")
    func keepalive() {
        var harness = Self.open(keepalive: 1_000)
        #expect(harness.receive(.ping, correlation: 77) == .send(.pong, correlation: 77))
        harness.session.sent(now: harness.now)
        guard case .send(.ping, let correlation) = harness.advance(1_000) else { Issue.record("no PING"); return }
        #expect(correlation & 0x8000_0000 != 0)
        // The PONG to its own keepalive is the session's, not a reply to a request.
        #expect(harness.receive(.pong, correlation: correlation) == .none)
        #expect(harness.receive(.pong, correlation: 3) == .deliver(.pong, correlation: 3))
        harness.session.sent(now: harness.now)
        let timeout = harness.advance(1_500)
        #expect(timeout.status == .timeout && timeout.closes)
    }

    @Test("[4.4-5] the client's own GOAWAY names in last_correlation the last request of the server it processed, a PING or a PUSH")
    func goawayLastCorrelation() {
        var harness = Self.open(keepalive: 1_000)
        _ = harness.receive(.ping, correlation: 77)
        let push = Message.push(Push(target: nil, id: Array(repeating: 7, count: 16)))
        #expect(harness.receive(push, correlation: 90) == .deliver(push, correlation: 90))
        harness.session.sent(now: harness.now)
        guard case .send(.ping, _) = harness.advance(1_000) else { Issue.record("no PING"); return }
        harness.session.sent(now: harness.now)
        guard case .sendAndClose(.goaway(let goaway), _) = harness.advance(1_500) else { Issue.record("no GOAWAY"); return }
        #expect(goaway.status == .timeout && goaway.lastCorrelation == 90)
    }

    @Test("[4.1-4] a request the client does not serve is answered ERROR BAD_REQUEST: a device serves PUSH, a provider only PING")
    func requestsNotServed() {
        let push = Message.push(Push(target: nil, id: Array(repeating: 7, count: 16)))
        let fetch = Message.fetch(Fetch(id: PayloadID(high: 1, low: 2), token: nil))
        var device = Self.open()
        #expect(device.receive(push, correlation: 5) == .deliver(push, correlation: 5))
        guard case .send(.error(let refusal), correlation: 6) = device.receive(fetch, correlation: 6) else { Issue.record("FETCH not refused"); return }
        #expect(refusal.status == .badRequest)
        var provider = Self.client()
        _ = provider.session.start(Hello(role: .provider), correlation: 1)
        _ = provider.receive(.helloOK(HelloOK(maxFrame: 65_536, keepaliveMs: 1_000, maxInflight: 8)), correlation: 1)
        guard case .send(.error(let pushRefusal), correlation: 7) = provider.receive(push, correlation: 7) else { Issue.record("PUSH to a provider not refused"); return }
        #expect(pushRefusal.status == .badRequest)
        #expect(provider.receive(.ping, correlation: 8) == .send(.pong, correlation: 8))
    }

    @Test("[6-6] an ERROR whose header carries OK is delivered as INTERNAL; other statuses as they came")
    func errorWithOK() {
        var harness = Self.open()
        let asInternal = Message.error(ErrorReply(status: .internalError, message: nil))
        #expect(harness.receive(.error(ErrorReply(status: .ok, message: nil)), correlation: 3) == .deliver(asInternal, correlation: 3))
        let busy = Message.error(ErrorReply(status: .busy, message: nil))
        #expect(harness.receive(busy, correlation: 4) == .deliver(busy, correlation: 4))
    }

    @Test("[5.5-2] GOAWAY SHUTTING_DOWN keeps the connection for the owed replies; [5.6-4] any other GOAWAY closes")
    func goaway() {
        var draining = Self.open()
        let shutdown = Goaway(status: .shuttingDown, lastCorrelation: 4)
        #expect(draining.receive(.goaway(shutdown), correlation: 0) == .goaway(shutdown, close: false))
        #expect(!draining.session.acceptsRequests)
        let reply = Message.ackOK(AckOK(id: PayloadID(high: 1, low: 2)))
        #expect(draining.receive(reply, correlation: 4) == .deliver(reply, correlation: 4))
        var replaced = Self.open()
        let goaway = Goaway(status: .replaced, lastCorrelation: 0)
        #expect(replaced.receive(.goaway(goaway), correlation: 0) == .goaway(goaway, close: true))
    }

    @Test("[5.6-3] a malformed reply fails its request; a malformed MISSED is dropped; a malformed PUSH is answered ERROR")
    func malformed() {
        var harness = Self.open()
        guard case .malformedReply(correlation: 9, _) = harness.receive(type: MessageType.storeOK.rawValue, correlation: 9, body: [0xFF]) else {
            Issue.record("malformed reply not reported")
            return
        }
        #expect(harness.receive(type: MessageType.missed.rawValue, correlation: 0, body: [0xFF]) == .none)
        guard case .send(.error, 12) = harness.receive(type: MessageType.push.rawValue, correlation: 12, body: [0xFF]) else {
            Issue.record("malformed PUSH not refused")
            return
        }
    }
}

@Suite("RequestWindow")
struct RequestWindowTests {
    @Test("[5.3-3] requests are numbered 1, 2, 3; [5.3-1] at most max_inflight outstanding, the rest queued in order")
    func windowAndQueue() {
        var window = RequestWindow<String>()
        window.maxInflight = 2
        let first = window.begin("a"), second = window.begin("b"), third = window.begin("c")
        #expect(first == 1 && second == 2 && third == nil)
        let queuedC = window.enqueue(.ping, "c"), queuedD = window.enqueue(.pong, "d")
        #expect(queuedC && queuedD)
        let blocked = window.nextQueued()
        #expect(blocked == nil)
        let completed = window.complete(1)
        #expect(completed == "a")
        let next = window.nextQueued()
        #expect(next?.1 == 3)
        #expect(window.outstanding[3] == "c" && window.queuedCount == 1)
    }

    @Test("[5.3-2] [5.3-5] replies match by correlation in any order; an unknown one matches nothing")
    func matching() {
        var window = RequestWindow<Int>()
        window.maxInflight = 8
        let ids = (0..<3).compactMap { window.begin($0) }
        let third = window.complete(ids[2]), first = window.complete(ids[0])
        #expect(third == 2 && first == 0)
        let again = window.complete(ids[0]), unknown = window.complete(99)
        #expect(again == nil && unknown == nil)
    }

    @Test("[5.5-2] a GOAWAY abandons the requests above last_correlation only")
    func abandonAbove() {
        var window = RequestWindow<Int>()
        window.maxInflight = 8
        for value in 1...5 { _ = window.begin(value) }
        let abandoned = window.abandon(above: 3)
        #expect(Set(abandoned) == [4, 5])
        #expect(window.outstanding.count == 3)
    }

    @Test("a full queue refuses; stopping abandons everything")
    func bounds() {
        var window = RequestWindow<Int>(maxQueued: 2)
        window.maxInflight = 1
        _ = window.begin(0)
        let one = window.enqueue(.ping, 1), two = window.enqueue(.ping, 2), three = window.enqueue(.ping, 3)
        #expect(one && two && !three)
        let all = window.abandonAll()
        #expect(Set(all) == [0, 1, 2])
        #expect(window.outstanding.isEmpty && window.queuedCount == 0)
    }
}

@Suite("PeerSession, frames a driver may hand over undecoded")
struct OwnersFrameTests {
    @Test("only after HELLO_OK, and never PING, GOAWAY, HELLO or the PONG to the session's own PING")
    func ownersFrames() {
        var harness = ClientSessionTests.client()
        _ = harness.session.start(Hello(role: .device), correlation: 1)
        #expect(!harness.session.isOwnersFrame(FrameHeader(type: .push, correlation: 1)))
        _ = harness.receive(.helloOK(HelloOK(maxFrame: 65_536, keepaliveMs: 1_000, maxInflight: 8)), correlation: 1)
        #expect(harness.session.isOwnersFrame(FrameHeader(type: .push, correlation: 1)))
        #expect(harness.session.isOwnersFrame(FrameHeader(type: .error, correlation: 4, status: .busy)))
        #expect(harness.session.isOwnersFrame(FrameHeader(type: .pong, correlation: 4)))
        for type in [MessageType.ping, .goaway, .hello] {
            #expect(!harness.session.isOwnersFrame(FrameHeader(type: type, correlation: 1)))
        }
        #expect(!harness.session.isOwnersFrame(FrameHeader(type: .pong, correlation: 0x8000_0001)))
    }
}
