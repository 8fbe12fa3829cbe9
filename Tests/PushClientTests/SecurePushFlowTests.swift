import Foundation
import Testing
import PushClient
import PushEventLoop
import PushSecurity
import PushStore
import PushTestSupport
import PushWire
import PushSession

/// A store and a gateway in this process, and devices and a provider from the PushClient
/// library on the test's own loop. The store may instead run as the real binary, for
/// the tests that kill it.
final class FlowFixture {
    let deployment: TemporaryDeployment
    /// The in-process store's clock; a store process keeps the real one.
    let clock = ManualClock()
    var store: any ReachableService
    var gateway: InProcessGateway
    let loop: EventLoop
    var devices: [String: DeviceClient] = [:]
    var shown: [String: [DeviceNotification]] = [:]
    var events: [String: [DeviceEvent]] = [:]
    var provider: ProviderClient!

    init(storeProcess: Bool = false, configureStore: (inout StoreConfiguration) -> Void = { _ in }) throws {
        deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        try deployment.addUser("bob", password: "bob-pw")
        if storeProcess {
            store = try ServiceProcess(["store", "--data-dir", deployment.directory])
        } else {
            store = try InProcessStore(deployment) { [clock] in
                $0.clock = clock.wallMilliseconds
                configureStore(&$0)
            }
        }
        gateway = try InProcessGateway(deployment)
        loop = try EventLoop()
        makeProvider()
    }

    deinit {
        provider.stop()
        for device in devices.values { device.stop() }
        loop.shutdown()
    }

    func makeProvider() {
        provider?.stop()
        provider = ProviderClient(loop: loop, store: endpoint(store), gateway: endpoint(gateway), providerKey: deployment.deployment.providerKey)
    }

    func endpoint(_ service: any ReachableService) -> ServerLink.Endpoint { ServerLink.Endpoint(host: service.host, port: service.port) }

    /// Stops the device and runs the loop until the gateway has seen it go.
    func stopDevice(_ name: String) {
        devices[name]?.stop()
        devices[name] = nil
        #expect(loop.run(until: { self.gateway.isOffline(name) }))
    }

    /// Starts a device enrolled in the deployment's registry; one started again keeps its
    /// registration, so the token it saved stays good.
    @discardableResult
    func startDevice(_ name: String, user: String = "alice") throws -> DeviceClient {
        let registration = try deployment.enrolledRegistration(name, user: user)
        let device = DeviceClient(loop: loop, gateway: endpoint(gateway), store: endpoint(store), registration: registration,
                                  deviceID: name, tokenStore: TokenStore(directory: deployment.directory + "/dev-" + name))
        device.onNotification = { [unowned self] in self.shown[name, default: []].append($0) }
        device.onEvent = { [unowned self] in self.events[name, default: []].append($0) }
        devices[name] = device
        device.start()
        return device
    }

    func connected(_ name: String) -> Bool { events[name]?.contains(.gatewayConnected) ?? false }

    func login(_ name: String, user: String = "alice") throws {
        var result: Result<UInt64, ClientError>?
        devices[name]?.login(user: user, password: Array("\(user)-pw".utf8)) { result = $0 }
        #expect(loop.run(until: { result != nil }))
        _ = try result?.get()
    }

    func send(_ text: String, to user: String = "alice", target: PushTarget? = nil) throws -> SendReceipt {
        var result: Result<SendReceipt, ClientError>?
        provider.send(ProviderClient.SecureMessage(recipient: user, payload: Array(text.utf8), target: target)) { result = $0 }
        guard loop.run(until: { result != nil }), let result else { throw ServiceError.failed("send did not finish") }
        return try result.get()
    }

    func texts(_ name: String) -> [String] {
        (shown[name] ?? []).filter { $0.content != .generic }.map(\.text)
    }

    func generic(_ name: String) -> [PayloadID] {
        (shown[name] ?? []).filter { $0.content == .generic }.map(\.id)
    }
}

@Suite("Secure push end to end", .ownThread, .serialized)
struct SecurePushFlowTests {
    @Test("[4.14-4] two devices: the logged-in one shows the text, the other the generic prompt until it logs in")
    func twoDevices() throws {
        let flow = try FlowFixture()
        try flow.startDevice("phone")
        try flow.startDevice("tablet")
        #expect(flow.loop.run(until: { flow.connected("phone") && flow.connected("tablet") }))
        try flow.login("phone")
        let receipt = try flow.send("the vault code is 1234")
        #expect(receipt.delivery == PushAck(written: 2, queued: 0))
        #expect(flow.loop.run(until: { flow.texts("phone") == ["the vault code is 1234"] && flow.generic("tablet") == [receipt.id] }))
        #expect(flow.texts("tablet").isEmpty)
        try flow.login("tablet")
        #expect(flow.loop.run(until: { flow.texts("tablet") == ["the vault code is 1234"] }))
        #expect(flow.generic("tablet") == [receipt.id], "the generic prompt was shown once")
    }

    @Test("a token that expires mid-stream gives the generic notification, and the real one after login")
    func tokenExpiresMidStream() throws {
        let flow = try FlowFixture { $0.settings.tokenLifetimeMs = 1_000 }
        try flow.startDevice("phone")
        #expect(flow.loop.run(until: { flow.connected("phone") }))
        try flow.login("phone")
        _ = try flow.send("before expiry")
        #expect(flow.loop.run(until: { flow.texts("phone") == ["before expiry"] }))
        flow.clock.advance(byMs: 1_500)
        let late = try flow.send("after expiry")
        #expect(flow.loop.run(until: { flow.generic("phone") == [late.id] }))
        try flow.login("phone")
        #expect(flow.loop.run(until: { flow.texts("phone") == ["before expiry", "after expiry"] }))
    }

    @Test("a gateway restart loses its queue, yet every message is shown after SYNC")
    func gatewayRestart() throws {
        let flow = try FlowFixture()
        try flow.startDevice("phone")
        #expect(flow.loop.run(until: { flow.connected("phone") }))
        try flow.login("phone")
        flow.stopDevice("phone")
        let sent = try (1...3).map { try flow.send("queued \($0)") }
        #expect(sent.allSatisfy { $0.delivery.queued == 1 })
        flow.gateway.stop()
        flow.gateway = try InProcessGateway(flow.deployment)
        flow.makeProvider()
        flow.events["phone"] = []
        try flow.startDevice("phone")
        #expect(flow.loop.run(until: { Set(flow.texts("phone")) == ["queued 1", "queued 2", "queued 3"] }))
    }

    @Test("[4.7-1] a store killed with SIGKILL during sends loses no acknowledged message")
    func storeKilledDuringSends() throws {
        let flow = try FlowFixture(storeProcess: true)
        let storeProcess = try #require(flow.store as? ServiceProcess)
        try flow.startDevice("phone")
        #expect(flow.loop.run(until: { flow.connected("phone") }))
        try flow.login("phone")
        var acknowledged: [PayloadID: String] = [:]
        var outstanding = 0
        var sent = 0
        var sending = true
        // Keep 32 sends in flight until the kill, so it lands in the middle of commits.
        func pump() {
            while sending, outstanding < 32, sent < 5_000 {
                let text = "message \(sent)"
                sent += 1
                outstanding += 1
                flow.provider.send(ProviderClient.SecureMessage(recipient: "alice", payload: Array(text.utf8))) { result in
                    outstanding -= 1
                    if case .success(let receipt) = result { acknowledged[receipt.id] = text }
                    pump()
                }
            }
        }
        pump()
        // A random moment while sends are being acknowledged.
        let killAfter = Int.random(in: 20...200)
        #expect(flow.loop.run(until: { acknowledged.count >= killAfter }, timeoutSeconds: 30))
        storeProcess.killHard()
        sending = false
        flow.provider.stop()  // what was in flight or queued fails: not acknowledged, not counted
        flow.loop.run(until: { outstanding == 0 })
        flow.store = try ServiceProcess(["store", "--data-dir", flow.deployment.directory])
        // The device keeps its token and reconnects by itself; SYNC brings back what it missed.
        flow.devices["phone"]?.stop()
        flow.devices["phone"] = nil
        flow.events["phone"] = []
        flow.makeProvider()
        try flow.startDevice("phone")
        let expected = Set(acknowledged.values)
        #expect(expected.count > 10, "the kill came while sends were being acknowledged")
        #expect(sent > expected.count, "some sends were cut off by the kill")
        #expect(flow.loop.run(until: { expected.isSubset(of: Set(flow.texts("phone"))) }, timeoutSeconds: 20),
                "\(expected.subtracting(flow.texts("phone")).count) acknowledged messages never shown")
    }

    @Test("[8-2] a payload for one user is never shown on another user's device")
    func otherUsersDevice() throws {
        let flow = try FlowFixture()
        try flow.startDevice("bobs-phone", user: "bob")
        #expect(flow.loop.run(until: { flow.connected("bobs-phone") }))
        try flow.login("bobs-phone", user: "bob")
        // A provider mistake: alice's payload pushed to bob's device.
        let misrouted = try flow.send("for alice only", to: "alice", target: .device("bobs-phone"))
        #expect(misrouted.delivery.written == 1)
        #expect(flow.loop.run(until: { flow.events["bobs-phone"]?.contains(.dropped(misrouted.id, .forbidden)) ?? false }))
        #expect(flow.texts("bobs-phone").isEmpty)
    }

    @Test("securepush demo runs and exits 0")
    func demo() throws {
        let result = try SecurePushBinary.run(["demo"], timeoutSeconds: 120)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("alice-tablet: \"Meeting moved to 15:00\""))
        #expect(result.stdout.contains(DeviceClient.genericText))
    }
}
