import Foundation
import Testing
import PushClient
import PushSecurity
import PushTestSupport
import PushWire

/// SEND with several stores over one PostgreSQL database (SPEC.md 4.17): each push is
/// forwarded by one store at a time, and another takes over what a dead store left.
@Suite("SEND on PostgreSQL, as processes", .ownThread, .serialized, .enabled(if: PostgresCluster.testsEnabled))
struct PostgresSendProcessTests {
    @Test("[4.17-4] [4.17-5] [4.12-2] a store that cannot reach a gateway is SIGKILLed with SENDs waiting: another store of the database claims them once their lease is over, each is delivered once, and either store replays a key and tells the push's outcome")
    func anotherStoreTakesOverTheOutbox() throws {
        let url = try PostgresCluster.shared().createDatabase()
        // A lease of a second, so the take-over comes within the test's patience.
        let deployment = try TemporaryDeployment(database: url, settings: [("store.outbox_lease_s", "1")])
        try deployment.addUser("alice", password: "alice-pw")
        let nowhere = try freeLoopbackPort()
        let storeA = try ServiceProcess(["store", "--data-dir", deployment.directory, "--gateway", "127.0.0.1:\(nowhere)",
                                         "--loops", "1", "--metrics", "127.0.0.1:0"])
        defer { storeA.killHard() }
        var sent: [PayloadID] = []
        let keyed = SendRequest(user: "alice", payload: Array("keyed".utf8), target: .device("phone"), idempotencyKey: "order-1")
        do {
            let provider = try deployment.provider(store: storeA.port)
            var requests = try (0..<30).map { index in
                try provider.send(.send(SendRequest(user: "alice", payload: Array("waiting \(index)".utf8), target: .device("phone"))))
            }
            requests.append(try provider.send(.send(keyed)))
            for correlation in requests {
                guard case .sendOK(let ok) = try provider.reply(to: correlation) else { Issue.record("a SEND failed"); return }
                sent.append(ok.id)
            }
        }
        #expect(try waitUntil { storeA.metric("securepush_store_outbox_depth") == 31 })
        storeA.killHard()
        _ = storeA.child.wait(seconds: 10)

        let gateway = try ServiceProcess(["gateway", "--data-dir", deployment.directory])
        defer { _ = gateway.terminate() }
        let device = try BlockingWireClient(host: "127.0.0.1", port: gateway.port, timeoutMs: 30_000)
        guard case .helloOK = try device.hello(Hello(role: .device, credential: deployment.registration("phone"))) else {
            Issue.record("the gateway refused the device"); return
        }
        let storeB = try ServiceProcess(["store", "--data-dir", deployment.directory, "--gateway", "127.0.0.1:\(gateway.port)",
                                         "--loops", "2", "--metrics", "127.0.0.1:0"])
        defer { _ = storeB.terminate() }
        var received: [[UInt8]] = []
        while received.count < sent.count {
            let (header, message) = try device.receive()
            guard case .push(let push) = message else { continue }
            received.append(push.id)
            _ = try device.send(.deliveryAck(DeliveryAck(id: push.id)), correlation: header.correlation)
        }
        #expect(Set(received) == Set(sent.map(\.bytes)), "every acknowledged SEND was announced")
        #expect(received.count == sent.count, "none twice")
        #expect(try device.request(.ping) == .pong)
        #expect((try? device.receive(timeoutMs: 1)) == nil, "nothing came twice")

        let provider = try deployment.provider(store: storeB.port)
        guard case .sendOK(let replayed) = try provider.request(.send(keyed)) else { Issue.record("the keyed SEND failed at B"); return }
        #expect(replayed.replayed && replayed.id == sent.last)
        var outcome: PushOutcome?
        #expect(try waitUntil {
            if case .statusOK(let status) = try provider.request(.status(StatusRequest(id: sent[0]))) { outcome = status.push }
            return outcome == .handed(PushAck(written: 1, queued: 0))
        }, "\(String(describing: outcome))")
    }

    @Test("[4.17-1] [4.17-6] on PostgreSQL a SEND with a key commits once; the same key at two stores at once gives one payload")
    func keysAcrossStores() throws {
        let url = try PostgresCluster.shared().createDatabase()
        let deployment = try TemporaryDeployment(database: url)
        try deployment.addUser("alice", password: "alice-pw")
        let nowhere = try freeLoopbackPort()
        let stores = try (0..<2).map { _ in
            try ServiceProcess(["store", "--data-dir", deployment.directory, "--gateway", "127.0.0.1:\(nowhere)", "--loops", "1"])
        }
        defer { for store in stores { _ = store.terminate() } }
        let providers = try stores.map { try deployment.provider(store: $0.port) }
        for round in 0..<20 {
            let request = SendRequest(user: "alice", payload: [UInt8(round)], idempotencyKey: "race-\(round)")
            let correlations = try providers.map { try $0.send(.send(request)) }
            var ids: Set<PayloadID> = []
            for (provider, correlation) in zip(providers, correlations) {
                switch try provider.reply(to: correlation) {
                case .sendOK(let ok): ids.insert(ok.id)
                case .error(let error) where error.status == .busy:
                    guard case .sendOK(let ok) = try provider.request(.send(request)) else { Issue.record("the retry failed"); return }
                    #expect(ok.replayed)
                    ids.insert(ok.id)
                case let other: Issue.record("round \(round): \(other)")
                }
            }
            #expect(ids.count == 1, "round \(round): one payload for one key, not \(ids.count)")
        }
    }
}

/// The HTTP API's tokens with several stores over one PostgreSQL database: minted once,
/// accepted by every store, revoked at once on all of them.
@Suite("HTTP API tokens on PostgreSQL, as processes", .ownThread, .serialized, .enabled(if: PostgresCluster.testsEnabled))
struct PostgresHTTPTokenProcessTests {
    @Test("[4.17-5] [4.17-7] a token made once works at both stores, a keyed POST retried at the other store replays its answer, and a revocation stops it at both")
    func tokensAreShared() throws {
        let url = try PostgresCluster.shared().createDatabase()
        let deployment = try TemporaryDeployment(database: url)
        try deployment.addUser("alice", password: "alice-pw")
        let gateway = try ServiceProcess(["gateway", "--data-dir", deployment.directory])
        defer { _ = gateway.terminate() }
        let stores = try (0..<2).map { _ in
            try ServiceProcess(["store", "--data-dir", deployment.directory, "--gateway", "127.0.0.1:\(gateway.port)", "--http", "127.0.0.1:0",
                                "--loops", "1"])
        }
        defer { for store in stores { _ = store.terminate() } }
        let made = try SecurePushBinary.run(["provider", "token", "create", "billing", "--data-dir", deployment.directory])
        #expect(made.status == 0, "\(made.stderr)")
        let token = made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let http = try stores.map { try HTTPTestConnection(port: try #require($0.announcedHTTPPort)) }
        let json = #"{"recipient":"alice","text":"paid"}"#
        let key = [("Idempotency-Key", "order-9")]

        let first = try http[0].post("/v1/messages", json: json, token: token, headers: key)
        let retried = try http[1].post("/v1/messages", json: json, token: token, headers: key)
        #expect(first.status == 201 && retried.status == 201, "\(first.text) \(retried.text)")
        #expect(try retried.json()["id"] as? String == first.json()["id"] as? String && retried.json()["replayed"] as? Bool == true)
        let createdAt = try first.json()["created_at"] as? String, replayedCreatedAt = try retried.json()["created_at"] as? String
        #expect(createdAt != nil && replayedCreatedAt == createdAt, "a replay gets the first answer, created_at too: \(retried.text)")

        // The same key on both stores at once: one commit; the other is answered with it,
        // or 503 BUSY to retry ([4.17-6]), never a final 409.
        for round in 0..<5 {
            let raceKey = [("Idempotency-Key", "race-\(round)")]
            let answers = try HTTPTestConnection.postAtOnce(http, path: "/v1/messages", json: json, token: token, headers: raceKey)
            #expect(answers.allSatisfy { $0.status == 201 || $0.status == 503 && $0.headers["retry-after"] != nil },
                    "\(answers.map { "\($0.status) \($0.text)" })")
            #expect(Set(answers.filter { $0.status == 201 }.compactMap { try? $0.json()["id"] as? String }).count == 1)
        }

        let id = String(token.split(separator: "_")[1])
        #expect(try SecurePushBinary.run(["provider", "token", "revoke", id, "--data-dir", deployment.directory]).status == 0)
        for connection in http {
            let refused = try connection.post("/v1/messages", json: json, token: token)
            #expect(refused.status == 401, "\(refused.text)")
        }
    }
}
