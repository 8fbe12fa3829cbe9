import Testing
import PushClient
import PushClock
import PushEventLoop
import PushSecurity
import PushTestSupport
import PushWire

/// ProviderClient against a scripted store on 127.0.0.1: BUSY and the like retried a
/// bounded number of times (SPEC.md 5.8-4), and what a GOAWAY SHUTTING_DOWN takes sent
/// again only when it is safe to repeat (5.8-5).
@Suite("ProviderClient: retries", .ownThread, .serialized)
struct ProviderClientRetryTests {
    static let id = PayloadID(high: 0x0102_0304_0506_0708, low: 0x1112_1314_1516_1718)

    final class Fixture {
        let loop: EventLoop
        let store: ScriptedServer
        let client: ProviderClient
        /// Answers a request (after HELLO) unless it returns false, then the store answers it OK.
        var script: ((ScriptedServer.Peer, Message, UInt32) -> Bool)?

        init() throws {
            loop = try EventLoop()
            store = try ScriptedServer(loop: loop)
            client = ProviderClient(loop: loop, store: store.endpoint, providerKey: try SecretKey.generate())
            store.onMessage = { [unowned self] peer, message, correlation in
                if ScriptedServer.answerHandshake(peer, message, correlation) || self.script?(peer, message, correlation) == true { return }
                let now = Clocks.wallMilliseconds()
                switch message {
                case .recall(let recall): peer.send(.recallOK(RecallOK(id: recall.id)), correlation: correlation)
                case .send: peer.send(.sendOK(SendOK(id: ProviderClientRetryTests.id, expiresAt: now + 60_000)), correlation: correlation)
                case .store: peer.send(.storeOK(StoreOK(id: ProviderClientRetryTests.id, expiresAt: now + 60_000)), correlation: correlation)
                default: peer.send(.error(ErrorReply(status: .badRequest)), correlation: correlation)
                }
            }
        }

        deinit {
            client.stop()
            store.stop()
            loop.shutdown()
        }

        /// Requests (not HELLO, PING) the store received, in order.
        var requests: [(peer: Int, message: Message, at: Int64)] {
            store.peers.flatMap { peer in
                peer.received.filter { $0.message.type != .hello && $0.message.type != .ping }.map { (peer.index, $0.message, $0.at) }
            }.sorted { $0.at < $1.at }
        }

        func recall() -> Result<Void, ClientError>? {
            var result: Result<Void, ClientError>?
            client.recall(ProviderClientRetryTests.id) { result = $0 }
            loop.run(until: { result != nil }, timeoutSeconds: 15)
            return result
        }
    }

    @Test("[5.8-4] a request answered BUSY, RATE_LIMITED or INTERNAL is sent again, first at least 100 ms later, and its success reported",
          arguments: [Status.busy, .rateLimited, .internalError])
    func retriedUntilAnswered(status: Status) throws {
        let fixture = try Fixture()
        var refusals = 2
        fixture.script = { peer, _, correlation in
            guard refusals > 0 else { return false }
            refusals -= 1
            peer.send(.error(ErrorReply(status: status)), correlation: correlation)
            return true
        }
        let result = fixture.recall()
        #expect(result.map { if case .success = $0 { true } else { false } } == true, "\(String(describing: result))")
        let times = fixture.requests.map(\.at)
        #expect(times.count == 3)
        if times.count == 3 {
            #expect(times[1] - times[0] >= 100, "first retry after \(times[1] - times[0]) ms")
            #expect(times[2] - times[1] >= 100)
        }
    }

    @Test("[5.8-4] a request answered BUSY every time is given up after a bounded number of sends, and BUSY reported")
    func givesUp() throws {
        let fixture = try Fixture()
        fixture.script = { peer, _, correlation in
            peer.send(.error(ErrorReply(status: .busy)), correlation: correlation)
            return true
        }
        let result = fixture.recall()
        guard case .failure(.status(.busy, _))? = result else {
            Issue.record("expected BUSY, got \(String(describing: result))")
            return
        }
        #expect(fixture.requests.count == ProviderClient.RetryPolicy().maxAttempts)
    }

    @Test("[5.8-4] a status that is not about load (NOT_FOUND) is reported at once, not retried")
    func notRetried() throws {
        let fixture = try Fixture()
        fixture.script = { peer, _, correlation in
            peer.send(.error(ErrorReply(status: .notFound)), correlation: correlation)
            return true
        }
        let result = fixture.recall()
        guard case .failure(.status(.notFound, _))? = result else {
            Issue.record("expected NOT_FOUND, got \(String(describing: result))")
            return
        }
        #expect(fixture.requests.count == 1)
    }

    enum Kind: String, CaseIterable, Sendable {
        case recall, sendWithKey, sendWithoutKey, store
        /// Safe to send again after it was lost ([5.8-5]).
        var repeatable: Bool { self == .recall || self == .sendWithKey }
    }

    @Test("[5.8-5] a request above a GOAWAY SHUTTING_DOWN's last_correlation is sent again on the next connection when safe to repeat (RECALL, SEND with a key); a STORE or a SEND without a key is reported disconnected",
          arguments: Kind.allCases)
    func lostToGoaway(kind: Kind) throws {
        let fixture = try Fixture()
        fixture.script = { [loop = fixture.loop] peer, _, correlation in
            guard peer.index == 0 else { return false }
            peer.send(.goaway(Goaway(status: .shuttingDown, lastCorrelation: correlation - 1)), correlation: 0)
            loop.schedule(after: .milliseconds(100)) { peer.close() }
            return true
        }
        var outcome: Result<PayloadID?, ClientError>?
        var message = ProviderClient.SecureMessage(recipient: "alice", payload: [1, 2, 3])
        message.ttlSeconds = 60
        switch kind {
        case .recall: fixture.client.recall(Self.id) { outcome = $0.map { nil } }
        case .sendWithKey: fixture.client.sendThroughStore(message, idempotencyKey: "k1") { outcome = $0.map(\.id) }
        case .sendWithoutKey: fixture.client.sendThroughStore(message) { outcome = $0.map(\.id) }
        case .store: fixture.client.store(message) { outcome = $0.map(\.id) }
        }
        #expect(fixture.loop.run(until: { outcome != nil }, timeoutSeconds: 10))
        let peers = fixture.requests.map(\.peer)
        if kind.repeatable {
            #expect(outcome.map { if case .success = $0 { true } else { false } } == true, "\(String(describing: outcome))")
            #expect(peers == [0, 1], "sent on the first connection, then again on the next: \(peers)")
        } else {
            #expect(outcome.map { if case .failure(.disconnected) = $0 { true } else { false } } == true, "\(String(describing: outcome))")
            #expect(peers == [0], "not sent again: \(peers)")
        }
    }
}
