import Testing
#if canImport(Glibc)
import Glibc
#endif
import PushClient
import PushClock
import PushEventLoop
@testable import PushGateway
import PushSecurity
import PushService
import PushSession
import PushTestSupport
import PushWire

/// A gateway in this process following the registry of a `FakeRegistryStore`, which the
/// test enrols into and revokes from, and may stop and start again on the same port.
final class FollowingGateway: GatewayUnderTest {
    let deployment: TemporaryDeployment
    let log = RegistryLog()
    private(set) var store: FakeRegistryStore?
    let storePort: Int
    let service: InProcessGateway

    /// - Parameter storeUp: start the store now; else the gateway starts with no store to reach.
    init(storeUp: Bool = true, waitMs: UInt32 = 2_000, configure: @escaping (inout GatewayConfiguration) -> Void = { _ in }) throws {
        deployment = try TemporaryDeployment()
        let store = try FakeRegistryStore(serverKey: deployment.deployment.serverKey, log: log)
        storePort = store.port
        if storeUp { self.store = store } else { store.stop() }
        service = try InProcessGateway(deployment) { [storePort] in
            $0.store = ServerLink.Endpoint(host: "127.0.0.1", port: storePort)
            $0.registryWaitMs = waitMs
            configure(&$0)
        }
    }

    var reachable: any ReachableService { service }

    func startStore() throws {
        store = try FakeRegistryStore(serverKey: deployment.deployment.serverKey, log: log, port: storePort)
    }

    func stopStore() {
        store?.stop()
        store = nil
    }

    /// What `securepush device enroll` does: a registration, recorded as enrolled.
    func enroll(_ device: String, user: String = "alice", tags: [String] = []) -> [UInt8] {
        let credential = deployment.registration(device, user: user, tags: tags)
        record(.enrolled, credential)
        return credential
    }

    func record(_ state: RegistryEntry.State, _ credential: [UInt8]) {
        if let store { store.record(state, credential) } else { log.record(state, credential) }
    }

    func hello(_ credential: [UInt8]) throws -> (BlockingWireClient, Message) {
        let client = try reachable.connect()
        return (client, try client.hello(Hello(role: .device, credential: credential)))
    }

    /// The gateway learns an enrolment on its next REGISTRY reply, which may come just
    /// after the test's HELLO: it holds that HELLO until then ([7.4-8]).
    func connected(_ credential: [UInt8]) throws -> BlockingWireClient {
        let (client, reply) = try hello(credential)
        guard case .helloOK = reply else { throw ServiceError.failed("device HELLO refused: \(reply)") }
        return client
    }

    var isReady: Bool { service.onLoop { $0.readiness() == .ready } ?? false }
    /// Ready, and every change recorded so far applied: ready alone means the first REGISTRY
    /// reply was applied, which may predate an enrolment the test made after the gateway
    /// started (then a HELLO of it is held, and refused if the next reply is late).
    var isCaughtUp: Bool {
        let latest = log.latest
        return isReady && service.onLoop { $0.logic.registry?.cursor } == latest
    }
    var metricsText: String { service.onLoop { $0.metrics.text } ?? "" }
}

func errorStatus(_ message: Message) -> Status? {
    if case .error(let error) = message { return error.status }
    return nil
}

@Suite("Gateway following a store's registry, in-process", .ownThread, .serialized)
struct GatewayRegistryServiceTests {
    @Test("[7.4-4] [4.16-12] a gateway started before its store answers device and provider HELLOs with BUSY and is not ready, then loads once the store comes up")
    func loadsWhenStoreComesUp() throws {
        let gateway = try FollowingGateway(storeUp: false)
        let phone = gateway.enroll("phone")
        #expect(errorStatus(try gateway.hello(phone).1) == .busy)
        // [4.16-12] A provider too: a PUSH answered now could not queue for offline devices.
        let credential = gateway.deployment.providerCredential(for: .gateway)
        #expect(errorStatus(try gateway.reachable.connect().hello(Hello(role: .provider, credential: credential))) == .busy)
        #expect(!gateway.isReady)
        #expect(gateway.service.onLoop { $0.readiness() } == .notReady("loading the device registry from the store"))
        try gateway.startStore()
        #expect(waitUntil(timeoutSeconds: 15) { gateway.isCaughtUp }, "loaded after the store came up")
        _ = try gateway.connected(phone)
        #expect(try gateway.reachable.connect().hello(Hello(role: .provider, credential: credential)).type == .helloOK,
                "the credential refused BUSY before its check was not remembered ([7.1-5])")
        #expect(gateway.metricsText.contains("securepush_gateway_registry_loaded 1"))
        #expect(gateway.metricsText.contains("securepush_gateway_registry_link_up 1"))
    }

    @Test("[7.4-4] only the enrolled registration connects: another signed one is BAD_CREDENTIALS, a revoked one too")
    func enrolledOnly() throws {
        let gateway = try FollowingGateway()
        let phone = gateway.enroll("phone")
        #expect(waitUntil { gateway.isCaughtUp })
        _ = try gateway.connected(phone)
        let (_, stranger) = try gateway.hello(gateway.deployment.registration("stranger"))
        #expect(stranger == .error(ErrorReply(status: .badCredentials, message: "registration not enrolled")))
        let tablet = gateway.enroll("tablet")
        gateway.record(.revoked, tablet)
        #expect(waitUntil {
            (try? gateway.hello(tablet).1) == .error(ErrorReply(status: .badCredentials, message: "registration revoked"))
        })
    }

    @Test("[7.4-8] a HELLO that comes before the gateway has heard of its enrolment is held, then admitted; nothing is said meanwhile")
    func helloBeforeEnrolmentIsHeld() throws {
        let gateway = try FollowingGateway()
        #expect(waitUntil { gateway.isCaughtUp })
        let phone = gateway.deployment.registration("phone")
        let client = try gateway.reachable.connect()
        let correlation = try client.send(.hello(Hello(role: .device, credential: phone)))
        // Held: no reply while the registry has not heard of the enrolment.
        #expect(throws: (any Error).self) { try client.reply(to: correlation, timeoutMs: 300) }
        gateway.record(.enrolled, phone)
        guard case .helloOK = try client.reply(to: correlation, timeoutMs: 5_000) else {
            Issue.record("the held HELLO was not admitted once the enrolment arrived")
            return
        }
        #expect(gateway.service.onLoop { $0.connectionCount } == 1)
    }

    @Test("[7.4-8] [7.4-4] a fresh registration never enrolled is refused once the hold is over; an old one at once; a revoked one as soon as the registry says so")
    func heldHelloIsRefusedInTheEnd() throws {
        let gateway = try FollowingGateway()
        #expect(waitUntil { gateway.isCaughtUp })
        let started = Clocks.monotonicMilliseconds()
        let (_, fresh) = try gateway.hello(gateway.deployment.registration("stranger"))
        let held = Clocks.monotonicMilliseconds() - started
        #expect(fresh == .error(ErrorReply(status: .badCredentials, message: "registration not enrolled")))
        #expect(held >= GatewayLogic.unheardHoldMs - 100, "refused after \(held) ms, before the hold was over")

        let issuedLongAgo = gateway.deployment.unenrolledRegistration(
            "old", issuedAtMs: Clocks.wallMilliseconds() - GatewayLogic.unheardEnrolmentMs - 1_000)
        let oldStart = Clocks.monotonicMilliseconds()
        let (_, old) = try gateway.hello(issuedLongAgo)
        #expect(old == .error(ErrorReply(status: .badCredentials, message: "registration not enrolled")))
        #expect(Clocks.monotonicMilliseconds() - oldStart < GatewayLogic.unheardHoldMs, "an old registration is not held")

        let tablet = gateway.deployment.registration("tablet")
        let client = try gateway.reachable.connect()
        let correlation = try client.send(.hello(Hello(role: .device, credential: tablet)))
        gateway.record(.revoked, tablet)
        #expect(try client.reply(to: correlation, timeoutMs: 5_000) == .error(ErrorReply(status: .badCredentials, message: "registration revoked")))
    }

    @Test("[7.4-8] a device that hangs up while held gives back its place under the connection cap")
    func heldPeerThatLeavesFreesItsSlot() throws {
        let gateway = try FollowingGateway { $0.limits.maxConnections = 1 }
        #expect(waitUntil { gateway.isCaughtUp })
        for index in 0..<3 {
            var client: BlockingWireClient? = try gateway.reachable.connect()
            _ = try client?.send(.hello(Hello(role: .device, credential: gateway.deployment.registration("gone-\(index)"))))
            #expect(waitUntil { gateway.metricsText.contains("securepush_gateway_hellos_awaiting_decision 1") }, "the HELLO is held")
            client = nil
        }
        #expect(waitUntil { gateway.metricsText.contains("securepush_gateway_pending_handshakes 0") }, "\(gateway.metricsText)")
        // With the cap at 1, a place kept by a peer that left would make this HELLO BUSY.
        let phone = gateway.enroll("phone")
        _ = try gateway.connected(phone)
    }

    @Test("[7.4-6] a revocation closes the live connection with GOAWAY REVOKED within seconds (long poll)")
    func revocationClosesConnection() throws {
        let gateway = try FollowingGateway(waitMs: 20_000)
        let phone = gateway.enroll("phone")
        #expect(waitUntil { gateway.isCaughtUp })
        let client = try gateway.connected(phone)
        #expect(waitUntil { (gateway.store?.served.held ?? 0) > 0 }, "the gateway waits on a held REGISTRY")
        gateway.record(.revoked, phone)
        let start = Clocks.monotonicMilliseconds()
        guard case .goaway(let goaway) = try client.nextPush(timeoutMs: 5_000).message else {
            Issue.record("no GOAWAY")
            return
        }
        #expect(goaway.status == .revoked)
        #expect(Clocks.monotonicMilliseconds() - start < 5_000)
        #expect(waitUntil { gateway.metricsText.contains("securepush_gateway_devices_revoked_total 1") })
    }

    @Test("[4.13-7] a push to an enrolled device that never connected is queued, and a tag reaches it too")
    func offlineEnrolledDevice() throws {
        let gateway = try FollowingGateway()
        let phone = gateway.enroll("phone", tags: ["news"])
        _ = gateway.enroll("tablet", tags: ["news"])
        #expect(waitUntil { gateway.isCaughtUp })
        let provider = try gateway.provider()
        #expect(try gateway.push(.device("phone"), id: "direct", via: provider) == PushAck(written: 0, queued: 1))
        #expect(try gateway.push(.tag("news"), id: "tagged", via: provider) == PushAck(written: 0, queued: 2))
        #expect(try gateway.push(.device("stranger"), id: "lost", via: provider) == PushAck(written: 0, queued: 0))
        let client = try gateway.connected(phone)
        #expect(try [client.nextPushID(), client.nextPushID()] == ["direct", "tagged"])
    }

    @Test("[7.4-4] the store goes away: the gateway serves from what it loaded, reconnects with its cursor and applies what changed")
    func storeRestart() throws {
        let gateway = try FollowingGateway()
        let phone = gateway.enroll("phone")
        let tablet = gateway.enroll("tablet")
        #expect(waitUntil { gateway.isCaughtUp })
        let phoneClient = try gateway.connected(phone)
        gateway.stopStore()
        #expect(waitUntil { gateway.metricsText.contains("securepush_gateway_registry_link_up 0") })
        _ = try gateway.connected(tablet)
        #expect(gateway.isReady, "still ready: it serves from the registry it loaded")
        gateway.record(.revoked, phone)  // while the store is down, as with `device revoke` on its database
        let laptop = gateway.enroll("laptop")
        try gateway.startStore()
        guard case .goaway(let goaway) = try phoneClient.nextPush(timeoutMs: 15_000).message else {
            Issue.record("no GOAWAY after the store came back")
            return
        }
        #expect(goaway.status == .revoked)
        _ = try gateway.connected(laptop)
        #expect(gateway.metricsText.contains("securepush_gateway_registry_entries{state=\"enrolled\"} 2"))
    }

    @Test("a store of another deployment refuses the gateway's credential: the gateway stays not ready and keeps trying")
    func foreignStore() throws {
        let gateway = try FollowingGateway(storeUp: false)
        let other = try TemporaryDeployment()
        let foreign = try FakeRegistryStore(serverKey: other.deployment.serverKey, log: gateway.log, port: gateway.storePort)
        defer { foreign.stop() }
        #expect(!waitUntil(timeoutSeconds: 1) { gateway.isReady })
        #expect(gateway.metricsText.contains("securepush_gateway_registry_link_up 0"))
    }
}

@Suite("A device whose registration is revoked", .ownThread, .serialized)
struct DeviceRevocationTests {
    @Test("[7.4-6] GOAWAY REVOKED stops DeviceClient with a permanent failure; a revoked registration's HELLO stops it too")
    func deviceStops() throws {
        let gateway = try FollowingGateway()
        let store = try InProcessStore(gateway.deployment)
        let phone = gateway.enroll("phone")
        #expect(waitUntil { gateway.isCaughtUp })
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let gatewayEndpoint = ServerLink.Endpoint(host: "127.0.0.1", port: gateway.service.port)
        let storeEndpoint = ServerLink.Endpoint(host: "127.0.0.1", port: store.port)

        var events: [DeviceEvent] = []
        let device = DeviceClient(loop: loop, gateway: gatewayEndpoint, store: storeEndpoint, registration: phone,
                                  deviceID: "phone", tokenStore: nil)
        device.onEvent = { events.append($0) }
        device.start()
        defer { device.stop() }
        #expect(loop.run(until: { events.contains(.gatewayConnected) }))
        gateway.record(.revoked, phone)
        #expect(loop.run(until: { events.contains { if case .stopped = $0 { true } else { false } } }))
        guard case .stopped(let failure)? = events.last else { Issue.record("not stopped: \(events)"); return }
        #expect(failure.service == "gateway")
        #expect(failure.error.status == .revoked && failure.error.isPermanent)
        #expect("\(failure.error)".contains("registration was revoked"))

        var again: [DeviceEvent] = []
        let restarted = DeviceClient(loop: loop, gateway: gatewayEndpoint, store: storeEndpoint, registration: phone,
                                     deviceID: "phone", tokenStore: nil)
        restarted.onEvent = { again.append($0) }
        restarted.start()
        defer { restarted.stop() }
        #expect(loop.run(until: { again.contains { if case .stopped = $0 { true } else { false } } }))
        guard case .stopped(let refusal)? = again.last else { Issue.record("not stopped: \(again)"); return }
        #expect(refusal.error == .refused(.badCredentials, "registration revoked"))
        #expect(!again.contains(.gatewayConnected))
    }
}

@Suite("Refused HELLO credentials are counted by role and reason", .ownThread)
struct CredentialRefusalMetricsTests {
    @Test("[7.1-5] a replayed provider credential, an expired one and a forged one each count under their reason")
    func providerReasons() throws {
        let gateway = try RunningGateway()
        let credential = gateway.deployment.providerCredential(for: .gateway)
        #expect(try gateway.reachable.connect().hello(Hello(role: .provider, credential: credential)).type == .helloOK)
        #expect(errorStatus(try gateway.reachable.connect().hello(Hello(role: .provider, credential: credential))) == .badCredentials)
        let old = HelloCredential.provider(gateway.deployment.deployment.providerKey)
            .make(for: .gateway, nowMs: Clocks.wallMilliseconds() - HelloCredential.windowMs - 60_000)
        #expect(errorStatus(try gateway.reachable.connect().hello(Hello(role: .provider, credential: old))) == .badCredentials)
        let forStore = gateway.deployment.providerCredential(for: .store)
        #expect(errorStatus(try gateway.reachable.connect().hello(Hello(role: .provider, credential: forStore))) == .badCredentials)
        #expect(errorStatus(try gateway.reachable.connect().hello(Hello(role: .provider))) == .badRequest)
        let text = gateway.metricsText
        for (reason, count) in [("replayed", 1), ("expired", 1), ("bad", 1), ("missing", 1)] {
            #expect(text.contains("securepush_gateway_credentials_refused_total{role=\"provider\",reason=\"\(reason)\"} \(count)"), "\(reason)")
        }
    }
}
