import Foundation
import PushClient
import PushClock
import PushEventLoop
import PushSecurity
import PushSession
import PushTestSupport
import PushWire
import Testing

/// A device and a provider given several store addresses (issue 14.5): they go through
/// the first that answers, move to the next when theirs dies or drains, and the device
/// shows each payload once however many stores list it.
@Suite("Store failover: device and provider", .ownThread, .serialized)
struct StoreFailoverDeviceTests {
    @Test("the first store address is dead: the device and the provider work through the second after one failed attempt each, without a backoff")
    func firstAddressDead() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let store = try InProcessStore(deployment)
        let gateway = try InProcessGateway(deployment)
        let dead = try readmeFreePort()
        let started = Clocks.monotonicMilliseconds()
        let clients = try FailoverClients(deployment, stores: [dead, store.port], gateway: gateway.port)
        #expect(clients.run(until: { clients.storeConnects == 1 }))
        // A backoff round would cost 50 to 150 ms more at the least, and grow; one refused
        // connect on loopback costs well under a millisecond.
        #expect(Clocks.monotonicMilliseconds() - started < 1_000)
        #expect(clients.storeFailures == [.connect(.refused)], "one failed attempt: \(clients.events)")
        #expect(clients.device.storeAddress == HostPort(host: "127.0.0.1", port: store.port))

        try clients.login()
        #expect(clients.run(until: { clients.events.contains(.gatewayConnected) }))
        let receipt = clients.send("through the second store")
        #expect(receipt.map { if case .success = $0 { true } else { false } } == true, "\(String(describing: receipt))")
        #expect(clients.providerErrors.filter { $0.service == "store" }.map(\.error) == [.connect(.refused)])
        #expect(clients.provider.storeAddress.port == store.port)
        #expect(clients.run(until: { clients.texts == ["through the second store"] }), "\(clients.shown)")
        #expect(clients.storeFailures.count == 1, "no further attempts once connected: \(clients.events)")
    }

    @Test("the device's store is killed: it moves to the other, SYNCs there, and a payload both stores list is shown once and acknowledged on each")
    func storeKilledShownOnce() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        _ = try deployment.enrolledRegistration("phone")
        // One payload and one token, then two stores that both hold them: the original
        // database and a copy of it, as two stores over one database would.
        let id: PayloadID
        let token: TokenStore.Saved
        do {
            let first = try ServiceProcess(["store", "--data-dir", deployment.directory])
            token = try StoreProbe.login(port: first.port)
            id = try StoreProbe.store(port: first.port, deployment, text: "shown once")
            #expect(first.terminate() == 0)
        }
        let copy = try CopiedDeployment(of: deployment)
        let storeA = try ServiceProcess(["store", "--data-dir", deployment.directory])
        defer { storeA.killHard() }
        let storeB = try ServiceProcess(["store", "--data-dir", copy.directory])
        defer { _ = storeB.terminate() }
        let gateway = try InProcessGateway(deployment)
        let tokens = TokenStore(directory: copy.directory + "/device-state")
        try tokens.save(token)

        let clients = try FailoverClients(deployment, stores: [storeA.port, storeB.port], gateway: gateway.port, tokens: tokens)
        #expect(clients.run(until: { clients.texts == ["shown once"] }), "\(clients.events)")
        #expect(clients.shown.first?.id == id)
        // The device acknowledges on store A; store B's copy has not heard of it.
        #expect(clients.run(until: { (try? StoreProbe.unacknowledged(port: storeA.port, token: token.token)) == [] }))
        #expect(try StoreProbe.unacknowledged(port: storeB.port, token: token.token) == [id])

        storeA.killHard()
        #expect(clients.run(until: { clients.storeConnects == 2 }), "\(clients.events)")
        #expect(clients.device.storeAddress.port == storeB.port)
        // B's SYNC lists the ID: the device acknowledges it there and does not show it again.
        #expect(clients.run(until: { (try? StoreProbe.unacknowledged(port: storeB.port, token: token.token)) == [] }))
        clients.idle(0.3)
        #expect(clients.texts == ["shown once"], "\(clients.shown)")

        // And it goes on: a new payload through B (the provider passes over the dead A).
        #expect(clients.run(until: { clients.events.contains(.gatewayConnected) }))
        let receipt = clients.send("after the move")
        #expect(receipt.map { if case .success = $0 { true } else { false } } == true, "\(String(describing: receipt))")
        #expect(clients.run(until: { clients.texts == ["shown once", "after the move"] }), "\(clients.shown)")
    }

    @Test("a store drains with GOAWAY SHUTTING_DOWN: the device and the provider move to the other at once and keep working")
    func gracefulDrain() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        // Two stores over one database: the deployment's SQLite file, opened by both.
        let storeA = try InProcessStore(deployment)
        let storeB = try InProcessStore(deployment)
        let gateway = try InProcessGateway(deployment)
        let clients = try FailoverClients(deployment, stores: [storeA.port, storeB.port], gateway: gateway.port)
        try clients.login()
        #expect(clients.run(until: { clients.events.contains(.gatewayConnected) && clients.storeConnects == 1 }))
        #expect(clients.device.storeAddress.port == storeA.port)
        let first = clients.send("before the drain")
        #expect(first.map { if case .success = $0 { true } else { false } } == true, "\(String(describing: first))")
        #expect(clients.run(until: { clients.texts == ["before the drain"] }))

        storeA.stop()
        let shuttingDown = { (event: DeviceEvent) -> Bool in
            if case .disconnected(from: "store", .goaway(.shuttingDown, _)) = event { true } else { false }
        }
        #expect(clients.run(until: { clients.events.contains(where: shuttingDown) }), "\(clients.events)")
        let goawayAt = Clocks.monotonicMilliseconds()
        #expect(clients.run(until: { clients.storeConnects == 2 }), "\(clients.events)")
        #expect(Clocks.monotonicMilliseconds() - goawayAt < 1_000, "moved at once, no backoff")
        #expect(clients.device.storeAddress.port == storeB.port)
        #expect(clients.storeFailures.count == 1, "only the GOAWAY, no failed attempt: \(clients.events)")

        let second = clients.send("after the drain")
        #expect(second.map { if case .success = $0 { true } else { false } } == true, "\(String(describing: second))")
        #expect(clients.provider.storeAddress.port == storeB.port)
        #expect(clients.run(until: { clients.texts == ["before the drain", "after the drain"] }), "\(clients.shown)")
        clients.idle(0.3)
        #expect(clients.texts == ["before the drain", "after the drain"], "each shown once: \(clients.shown)")
    }

    @Test("a STORE in flight when its store dies fails to the caller with .disconnected and is not sent to the other store")
    func storeInFlightNotResent() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let storeA = try ServiceProcess(["store", "--data-dir", deployment.directory])
        defer { storeA.killHard() }
        let storeB = try InProcessStore(deployment)
        let gateway = try InProcessGateway(deployment)
        let clients = try FailoverClients(deployment, stores: [storeA.port, storeB.port], gateway: gateway.port)
        #expect(clients.providerReachesAStore())
        #expect(clients.provider.storeAddress.port == storeA.port)

        // A stopped process reads nothing: the STORE sits in its socket, sent and unanswered.
        storeA.child.signal(SIGSTOP)
        var result: Result<SendReceipt, ClientError>?
        clients.provider.send(ProviderClient.SecureMessage(recipient: "alice", payload: Array("in flight".utf8))) { result = $0 }
        clients.idle(0.2)
        #expect(result == nil, "no reply from a stopped store")
        storeA.killHard()
        #expect(clients.run(until: { result != nil }))
        #expect(result.map { if case .failure(.disconnected) = $0 { true } else { false } } == true, "\(String(describing: result))")

        // The provider is on B now, and B never saw that STORE.
        #expect(clients.providerReachesAStore())
        #expect(clients.provider.storeAddress.port == storeB.port)
        clients.idle(0.2)
        #expect(StoreProbe.storesAnswered(storeB) == 0)
        let again = clients.send("sent again by the caller")
        #expect(again.map { if case .success = $0 { true } else { false } } == true, "\(String(describing: again))")
        #expect(StoreProbe.storesAnswered(storeB) == 1)
    }
}
