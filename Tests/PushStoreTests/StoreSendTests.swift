@testable import PushStoreLogic
import Testing
import PushWire
@testable import PushStore

/// SEND in the store's logic over a real SQLite file (SPEC.md 4.17), without sockets.
@Suite("Store SEND")
struct StoreSendTests {
    static func forwarding() -> StoreSettings {
        var settings = StoreSettings()
        settings.forwardsPushes = true
        return settings
    }

    func sendOK(_ store: StoreFixture, _ request: SendRequest) throws -> SendOK {
        let reply = try store.send(.send(request), on: store.session(.provider))
        guard case .sendOK(let ok)? = reply else { throw StoreTestError.unexpected(reply) }
        return ok
    }

    func waiting(_ store: StoreFixture) throws -> [OutboxEntry] {
        try store.reader.waitingPushes(after: 0, limit: 100, nowMs: store.now)
    }

    func pushState(_ store: StoreFixture, _ id: PayloadID) throws -> PushOutcome? {
        let reply = try store.send(.status(StatusRequest(id: id)), on: store.session(.provider))
        guard case .statusOK(let status)? = reply else { return nil }
        return status.push
    }

    @Test("[4.17-1] [4.17-3] SEND commits the payload and its push together; the push goes to the recipient, once, within the payload's life")
    func sendCommitsPayloadAndPush() throws {
        let store = try StoreFixture(settings: Self.forwarding())
        let ok = try sendOK(store, SendRequest(user: "alice", payload: Array("hello".utf8), ttlSeconds: 600, alert: true,
                                               collapseKey: "chat", pushTTLSeconds: 120))
        #expect(!ok.replayed)
        #expect(try store.locate(ok.id)?.body == Array("hello".utf8))
        let entries = try waiting(store)
        #expect(entries.count == 1)
        let push = try #require(entries.first?.push)
        #expect(push.target == .user("alice"))
        #expect(push.user == "alice" && push.once)
        #expect(push.id == ok.id.bytes && push.alert && push.collapseKey == "chat" && push.ttlSeconds == 120)
        #expect(entries.first?.expiresAt == ok.expiresAt)
    }

    @Test("[4.17-3] the push's TTL defaults to the payload's and never outlives it")
    func pushTTLWithinThePayloadsLife() throws {
        let store = try StoreFixture(settings: Self.forwarding())
        _ = try sendOK(store, SendRequest(user: "alice", payload: [1], ttlSeconds: 300))
        _ = try sendOK(store, SendRequest(user: "alice", payload: [2], ttlSeconds: 60, pushTTLSeconds: 3600))
        let entries = try waiting(store)
        #expect(entries.map(\.push.ttlSeconds) == [300, 3600])
        // 10 s later the second push may wait 50 s at most: what is left of its payload.
        #expect(entries[1].pushToSend(nowMs: store.now + 10_000)?.ttlSeconds == 50)
        #expect(entries[1].pushToSend(nowMs: store.now + 60_000) == nil, "its payload has expired: no PUSH")
    }

    @Test("[4.17-2] a device or tag target is kept; another user or an empty target is BAD_REQUEST")
    func targets() throws {
        let store = try StoreFixture(settings: Self.forwarding())
        _ = try sendOK(store, SendRequest(user: "alice", payload: [1], target: .device("phone")))
        _ = try sendOK(store, SendRequest(user: "alice", payload: [2], target: .tag("team")))
        _ = try sendOK(store, SendRequest(user: "alice", payload: [3], target: .user("alice")))
        #expect(try waiting(store).map(\.push.target) == [.device("phone"), .tag("team"), .user("alice")])
        for target: PushTarget in [.user("bob"), .device(""), .tag("")] {
            let reply = try store.send(.send(SendRequest(user: "alice", payload: [4], target: target)), on: store.session(.provider))
            #expect(status(of: reply) == .badRequest, "\(target)")
        }
        #expect(try waiting(store).count == 3, "a refused SEND stores nothing")
    }

    @Test("[4.17-1] a SEND for an unknown user or over the size limit commits neither payload nor push")
    func refusedSendLeavesNothing() throws {
        let store = try StoreFixture(settings: Self.forwarding())
        let provider = store.session(.provider)
        #expect(status(of: try store.send(.send(SendRequest(user: "carol", payload: [1])), on: provider)) == .unknownUser)
        let big = [UInt8](repeating: 7, count: StoreSettings().maxPayloadBytes + 1)
        #expect(status(of: try store.send(.send(SendRequest(user: "alice", payload: big)), on: provider)) == .tooLarge)
        #expect(status(of: try store.send(.send(SendRequest(user: "alice", payload: [1], ttlSeconds: 0)), on: provider)) == .badRequest)
        #expect(try waiting(store).isEmpty)
    }

    @Test("a store with no gateway to hand pushes to refuses SEND with BAD_REQUEST; STORE still works")
    func noGatewayNoSend() throws {
        let store = try StoreFixture()
        let reply = try store.send(.send(SendRequest(user: "alice", payload: [1])), on: store.session(.provider))
        guard case .error(let error)? = reply else { Issue.record("\(String(describing: reply))"); return }
        #expect(error.status == .badRequest && error.message?.contains("--gateway") == true)
        _ = try store.store("still fine")
    }

    @Test("[4.12-2] STATUS: push_state 1 until the gateway's PUSH_ACK is recorded, then 2 with its counts; absent for STORE")
    func statusReportsThePush() throws {
        let store = try StoreFixture(settings: Self.forwarding())
        let sent = try sendOK(store, SendRequest(user: "alice", payload: [1]))
        #expect(try pushState(store, sent.id) == .waiting)
        let entry = try #require(try waiting(store).first)
        _ = try store.writer.commit([.pushesHanded([HandedPush(sequence: entry.sequence, ack: PushAck(written: 2, queued: 1),
                                                               handedAt: store.now)])])
        #expect(try pushState(store, sent.id) == .handed(PushAck(written: 2, queued: 1)))
        #expect(try waiting(store).isEmpty, "an answered push no longer waits")
        let stored = try store.store("by STORE")
        #expect(try pushState(store, stored) == PushOutcome.none)
    }

    @Test("[4.17-4] a push whose payload was recalled or has expired no longer waits")
    func recalledOrExpiredPushesDoNotWait() throws {
        let store = try StoreFixture(settings: Self.forwarding())
        let recalled = try sendOK(store, SendRequest(user: "alice", payload: [1], ttlSeconds: 600))
        _ = try sendOK(store, SendRequest(user: "alice", payload: [2], ttlSeconds: 10))
        let kept = try sendOK(store, SendRequest(user: "alice", payload: [3], ttlSeconds: 600))
        #expect(try store.send(.recall(Recall(id: recalled.id)), on: store.session(.provider)) == .recallOK(RecallOK(id: recalled.id)))
        store.now += 11_000
        #expect(try waiting(store).map(\.push.id) == [kept.id.bytes])
        // Pages follow the sequence.
        let first = try #require(try waiting(store).first)
        #expect(try store.reader.waitingPushes(after: first.sequence, limit: 10, nowMs: store.now).isEmpty)
    }

    @Test("[4.17-5] the same key and request within 24 h replays SEND_OK and stores nothing; other content is CONFLICT")
    func idempotentRetry() throws {
        let store = try StoreFixture(settings: Self.forwarding())
        let request = SendRequest(user: "alice", payload: Array("once".utf8), idempotencyKey: "order-1")
        let first = try sendOK(store, request)
        #expect(!first.replayed)
        store.now += 3_600_000
        let again = try sendOK(store, request)
        #expect(again.replayed && again.id == first.id && again.expiresAt == first.expiresAt)
        // Defaults spelled out are the same request.
        var explicit = request
        explicit.target = .user("alice")
        explicit.pushTTLSeconds = request.ttlSeconds
        #expect(try sendOK(store, explicit).id == first.id)
        #expect(try waiting(store).count == 1, "nothing new was stored")
        var other = request
        other.payload = Array("twice".utf8)
        #expect(status(of: try store.send(.send(other), on: store.session(.provider))) == .conflict)
        // Another key is another SEND.
        var otherKey = request
        otherKey.idempotencyKey = "order-2"
        #expect(try sendOK(store, otherKey).id != first.id)
        // After 24 h the key is free again.
        store.now += IdempotencyRecord.lifetimeMs
        let later = try sendOK(store, other)
        #expect(!later.replayed && later.id != first.id)
    }

    @Test("[4.17-6] while the first SEND with a key is being committed a second gets BUSY; a refused SEND leaves its key free")
    func keyInFlight() throws {
        let store = try StoreFixture(settings: Self.forwarding())
        let provider = store.session(.provider)
        let request = SendRequest(user: "alice", payload: [1], idempotencyKey: "k")
        let committing = store.begin(.send(request), session: provider)
        guard case .commit = committing else { Issue.record("\(committing)"); return }
        #expect(status(of: try store.send(.send(request), on: provider)) == .busy)
        guard case .sendOK(let first)? = try store.perform(committing, session: provider) else { Issue.record("no SEND_OK"); return }
        #expect(try sendOK(store, request) == SendOK(id: first.id, expiresAt: first.expiresAt, replayed: true))

        var refused = SendRequest(user: "carol", payload: [1], idempotencyKey: "free")
        #expect(status(of: try store.send(.send(refused), on: provider)) == .unknownUser)
        refused.user = "alice"
        #expect(!(try sendOK(store, refused).replayed), "the key of a refused SEND is unused")
    }

    @Test("[4.17-7] keys are one namespace for every provider connection")
    func keysAcrossConnections() throws {
        let store = try StoreFixture(settings: Self.forwarding())
        let request = SendRequest(user: "alice", payload: [1], idempotencyKey: "shared")
        let first = try sendOK(store, request)
        let reply = try store.send(.send(request), on: store.session(.provider))
        #expect(reply == .sendOK(SendOK(id: first.id, expiresAt: first.expiresAt, replayed: true)))
    }

    @Test("the sweep forgets expired keys and the pushes of forgotten payloads")
    func sweepForgets() throws {
        let store = try StoreFixture(settings: Self.forwarding())
        _ = try sendOK(store, SendRequest(user: "alice", payload: [1], ttlSeconds: 10, idempotencyKey: "old"))
        store.now += IdempotencyRecord.lifetimeMs + PayloadLife.tombstoneRetentionMs + 1
        _ = try store.writer.sweepExpired(nowMs: store.now)
        #expect(try store.reader.idempotencyRecord(IdempotencyKey(scope: IdempotencyKey.providerScope, key: "old")) == nil)
        #expect(try store.reader.pushOutcome(sequence: 1) == PushOutcome.none)
    }
}
