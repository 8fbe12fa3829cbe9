import Dispatch
import Foundation
import PushStoreLogic
import Testing
import PushClient
import PushEventLoop
import PushSession
import PushStore
import PushTestSupport
import PushWire

func registryReply(_ message: Message) -> RegistryOK? {
    if case .registryOK(let ok) = message { return ok }
    return nil
}

@Suite("REGISTRY served by a running store", .ownThread)
struct RegistryServiceTests {
    @Test("[4.1-3] REGISTRY only from a gateway, and a gateway only PING and REGISTRY; [4.16-1] a gateway reads the registry", arguments: Backend.available)
    func roles(_ backend: Backend) throws {
        let store = try RunningStore(backend)
        let phone = try store.deployment.enroll("phone", tags: ["news"])
        let registry = Message.registry(RegistryRequest())
        #expect(errorStatus(try store.device().request(registry)) == .forbidden)
        #expect(errorStatus(try store.provider().request(registry)) == .forbidden)
        let gateway = try store.gateway()
        #expect(try gateway.request(.ping) == .pong)
        for request in [Message.login(Login(user: "alice", password: Array("alice-pw".utf8), deviceID: "phone")),
                        .store(StoreRequest(user: "alice", payload: [1])), .sync(Sync(token: [1]))] {
            #expect(errorStatus(try gateway.request(request)) == .forbidden, "\(request.type)")
        }
        let ok = try #require(registryReply(try gateway.request(registry)))
        #expect(ok.entries == [RegistryEntry(state: .enrolled, credential: phone)] && ok.cursor == 1 && !ok.hasMore)
    }

    @Test("[4.16-8] a held REGISTRY is answered promptly with a revocation made by another connection, and empty when its wait ends", arguments: Backend.available)
    func longPoll(_ backend: Backend) throws {
        let log = CapturedLog()
        let store = try RunningStore(backend) { $0.logger = log.logger(label: "securepush.store", level: .info) }
        try store.deployment.enroll("phone")
        let gateway = try store.gateway()
        let loaded = try #require(registryReply(try gateway.request(.registry(RegistryRequest()))))
        let held = try gateway.send(.registry(RegistryRequest(cursor: loaded.cursor, waitMs: 30_000)))
        #expect(throws: BlockingWireClient.Failure.self, "nothing to say yet: held") { try gateway.receive(timeoutMs: 300) }
        #expect(waitUntil { store.service.onLoop { $0.metrics.text.contains("securepush_store_registry_held_requests 1") } ?? false })
        try store.deployment.revoke("phone")
        let changed = try #require(registryReply(try gateway.reply(to: held, timeoutMs: 10_000)))
        #expect(changed.entries.map(\.state) == [.revoked] && changed.cursor == loaded.cursor + 1)
        #expect(waitUntil { log.text.contains("info registry changed") && log.text.contains("revoked=1") }, "\(log.text)")

        let empty = try #require(registryReply(try gateway.request(.registry(RegistryRequest(cursor: changed.cursor, waitMs: 200)),
                                                                   timeoutMs: 10_000)))
        #expect(empty.entries.isEmpty && empty.cursor == changed.cursor && !empty.hasMore)
        let metrics = store.service.onLoop { $0.metrics.text } ?? ""
        #expect(metrics.contains(#"securepush_store_requests_total{type="registry",status="ok"} 3"#), "\(metrics)")
        #expect(metrics.contains(#"securepush_store_registry_changes_total{state="revoked"} 1"#))
        #expect(metrics.contains("securepush_store_registry_held_requests 0"))
    }

    @Test("[4.16-9] a draining store answers a held REGISTRY at once with no entries", arguments: Backend.available)
    func drainAnswersHeld(_ backend: Backend) throws {
        let store = try RunningStore(backend)
        let gateway = try store.gateway()
        let held = try gateway.send(.registry(RegistryRequest(cursor: 0, waitMs: 30_000)))
        #expect(waitUntil { store.service.onLoop { $0.metrics.text.contains("securepush_store_registry_held_requests 1") } ?? false })
        // Starts the drain on the store's loop and returns at once.
        store.service.onLoop { $0.drain {} }
        // Until the store closes the connection, which it does once the held request is
        // answered rather than after its 30 s.
        var replies: [(UInt32, Message)] = []
        while let frame = try? gateway.receive(timeoutMs: 10_000) { replies.append((frame.header.correlation, frame.message)) }
        #expect(replies.contains { $0 == held && $1 == .registryOK(RegistryOK(entries: [], cursor: 0, hasMore: false)) }, "\(replies)")
        #expect(replies.contains { errorStatus($1) == .shuttingDown }, "\(replies)")
    }

    @Test("[7.3-3] a token stops working at once when its device is revoked under a running store, on a connection already open", arguments: Backend.available)
    func revocationReachesTokens(_ backend: Backend) throws {
        let store = try RunningStore(backend)
        let id = try store.store("for alice")
        let token = try store.login("alice")
        let device = try store.device()
        guard case .fetchOK = try device.request(.fetch(Fetch(id: id, token: token))) else { Issue.record("FETCH failed"); return }
        try store.deployment.revoke("phone")
        // The store looks for registry changes at most once per usersRecheckMs (1 ms) of its
        // clock; moved past that, the very next FETCH must see the revocation.
        store.clock.advance(byMs: Int64(StoreSettings().usersRecheckMs))
        #expect(errorStatus(try device.request(.fetch(Fetch(id: id, token: token)))) == .badToken)
        #expect(errorStatus(try device.request(.login(Login(user: "alice", password: Array("alice-pw".utf8), deviceID: "phone")))) == .badCredentials)
        let metrics = store.service.onLoop { $0.metrics.text } ?? ""
        #expect(metrics.contains(#"securepush_store_tokens_revoked_total{reason="device_not_enrolled"} 1"#), "\(metrics)")
        #expect(metrics.contains("securepush_store_logins_device_not_enrolled_total 1"))
    }
}
