import Foundation
import Testing
import PushClient
import PushEventLoop
import PushSecurity
import PushSession
import PushTestSupport
import PushWire

/// A device and a provider given several gateway addresses (issue 15.7): they go through
/// the first that answers and move to the next when theirs dies (refused, dropped, GOAWAY
/// SHUTTING_DOWN); after each gateway HELLO_OK the device SYNCs with the store, so what
/// the lost gateway held is still shown, once. The gateways here are independent (no
/// cluster): the store is what carries a payload across the move.
@Suite("Gateway failover: device and provider", .ownThread, .serialized)
struct GatewayFailoverTests {
    @Test("the first gateway address is dead: the device and the provider work through the second after one refused attempt each")
    func firstAddressDead() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let store = try InProcessStore(deployment)
        let gateway = try InProcessGateway(deployment)
        let dead = try readmeFreePort()
        let clients = try FailoverClients(deployment, stores: [store.port], gateways: [dead, gateway.port])
        try clients.login()
        #expect(clients.run(until: { clients.gatewayConnects == 1 }), "\(clients.events)")
        #expect(clients.gatewayFailures == [.connect(.refused)], "one failed attempt: \(clients.events)")
        #expect(clients.device.gatewayAddress.port == gateway.port)

        let receipt = clients.send("through the second gateway")
        guard case .success(let sent)? = receipt else {
            Issue.record("send failed: \(String(describing: receipt))")
            return
        }
        #expect(sent.delivery.written == 1, "the device is on the gateway the provider reached")
        #expect(clients.providerErrors.filter { $0.service == "gateway" }.map(\.error) == [.connect(.refused)])
        #expect(clients.provider.gatewayAddress?.port == gateway.port)
        #expect(clients.run(until: { clients.texts == ["through the second gateway"] }), "\(clients.shown)")
        #expect(clients.gatewayFailures.count == 1, "no further attempts once connected: \(clients.events)")
    }

    @Test("the device's gateway drains (GOAWAY SHUTTING_DOWN): it moves to the second, SYNCs there, and every stored payload is shown exactly once")
    func gatewayStoppedShownOnce() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let store = try InProcessStore(deployment)
        let first = try InProcessGateway(deployment)
        let second = try InProcessGateway(deployment)
        let clients = try FailoverClients(deployment, stores: [store.port], gateways: [first.port, second.port])
        try clients.login()
        #expect(clients.run(until: { clients.gatewayConnects == 1 && first.isOnline("phone") }), "\(clients.events)")

        #expect(isSuccess(clients.send("one, pushed through the first")))
        #expect(clients.run(until: { clients.texts.count == 1 }), "\(clients.shown)")
        // Stored with no push, as if the push had died with the gateway: only a SYNC finds it.
        _ = try StoreProbe.store(port: store.port, deployment, text: "two, stored while the push path failed")
        clients.idle(0.3)
        #expect(clients.texts == ["one, pushed through the first"], "nothing but a SYNC shows the second: \(clients.shown)")

        first.stop()
        #expect(clients.run(until: { clients.gatewayConnects == 2 }), "\(clients.events)")
        #expect(clients.gatewayFailures.first?.status == .shuttingDown, "\(clients.gatewayFailures)")
        #expect(clients.device.gatewayAddress.port == second.port)
        #expect(clients.run(until: { clients.texts.count == 2 }), "the SYNC after the new gateway's HELLO_OK: \(clients.shown)")
        #expect(clients.storeConnects == 1, "the store connection stayed up: the SYNC came from the gateway move")

        // The provider's gateway drained too: it moves on by itself.
        #expect(isSuccess(clients.send("three, pushed through the second")))
        #expect(clients.provider.gatewayAddress?.port == second.port)
        #expect(clients.run(until: { clients.texts.count == 3 }), "\(clients.shown)")
        clients.idle(0.3)
        #expect(clients.texts == ["one, pushed through the first", "two, stored while the push path failed",
                                  "three, pushed through the second"], "each once: \(clients.shown)")
        #expect(Set(clients.shown.map(\.id)).count == 3)
    }

    @Test("the device's gateway is SIGKILLed (the connection drops, no GOAWAY): it moves to the second and SYNCs what the dead one held")
    func gatewayKilled() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let store = try InProcessStore(deployment)
        let doomed = try ServiceProcess(["gateway", "--data-dir", deployment.directory])
        defer { doomed.killHard() }
        let second = try InProcessGateway(deployment)
        let clients = try FailoverClients(deployment, stores: [store.port], gateways: [doomed.port, second.port])
        try clients.login()
        #expect(clients.run(until: { clients.gatewayConnects == 1 }), "\(clients.events)")
        #expect(clients.device.gatewayAddress.port == doomed.port)
        #expect(isSuccess(clients.send("before the crash")))
        #expect(clients.run(until: { clients.texts.count == 1 }), "\(clients.shown)")
        _ = try StoreProbe.store(port: store.port, deployment, text: "lost with the crashed gateway")
        clients.idle(0.3)
        #expect(clients.texts.count == 1)

        doomed.killHard()
        #expect(clients.run(until: { clients.gatewayConnects == 2 }), "\(clients.events)")
        #expect(clients.device.gatewayAddress.port == second.port)
        #expect(clients.gatewayFailures.first == .disconnected, "\(clients.gatewayFailures)")
        #expect(clients.run(until: { clients.texts.count == 2 }), "\(clients.shown)")
        #expect(isSuccess(clients.send("after the crash")))
        #expect(clients.run(until: { clients.texts.count == 3 }), "\(clients.shown)")
        clients.idle(0.3)
        #expect(clients.texts == ["before the crash", "lost with the crashed gateway", "after the crash"], "\(clients.shown)")
    }

    @Test("GOAWAY REPLACED stops the device for good: it does not move to the next gateway, where it would replace the newer connection in turn")
    func replacedDoesNotBounce() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let store = try InProcessStore(deployment)
        let first = try InProcessGateway(deployment)
        let second = try InProcessGateway(deployment)
        let clients = try FailoverClients(deployment, stores: [store.port], gateways: [first.port, second.port])
        #expect(clients.run(until: { clients.gatewayConnects == 1 && first.isOnline("phone") }), "\(clients.events)")

        // The same device id again, on the first gateway only: the newer connection wins.
        let newer = try DeviceClient(loop: clients.loop, gateway: FailoverClients.endpoint([first.port]),
                                     store: FailoverClients.endpoint([store.port]),
                                     registration: deployment.enrolledRegistration("phone"), deviceID: "phone", tokenStore: nil)
        var newerEvents: [DeviceEvent] = []
        newer.onEvent = { newerEvents.append($0) }
        newer.start()
        defer { newer.stop() }
        #expect(clients.run(until: { clients.events.contains { if case .stopped = $0 { true } else { false } } }), "\(clients.events)")
        #expect(clients.events.last.map { if case .stopped(let failure) = $0 { failure.error.status == .replaced } else { false } } == true,
                "stopped by REPLACED: \(clients.events)")
        clients.idle(1.0)
        #expect(clients.gatewayConnects == 1, "no move to another gateway: \(clients.events)")
        #expect(second.onLoop { $0.logic.devices["phone"] == nil } == true, "the second gateway never saw the device")
        #expect(first.isOnline("phone"), "the newer connection stays")
        #expect(newerEvents.filter { $0 == .gatewayConnected }.count == 1, "\(newerEvents)")
    }

    private func isSuccess(_ result: Result<SendReceipt, ClientError>?) -> Bool {
        if case .success? = result { return true }
        return false
    }
}
