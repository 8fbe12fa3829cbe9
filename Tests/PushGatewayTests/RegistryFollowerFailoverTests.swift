import Foundation
import PushClient
import PushClock
import PushEventLoop
import PushGateway
import PushSecurity
import PushSession
import PushTestSupport
import PushWire
import Testing

/// A gateway following the registry through a list of stores over one database (issue
/// 14.5): it loads through the first that answers, and when that one fails it moves to the
/// next and goes on from its cursor ([4.16-13]), so revocations keep reaching it.
@Suite("Registry follower failover across stores", .ownThread, .serialized)
struct RegistryFollowerFailoverTests {
    /// A gateway in this process following the stores on 127.0.0.1 at `ports`, in order.
    private func gateway(_ deployment: TemporaryDeployment, stores ports: [Int], waitMs: UInt32 = 2_000) throws -> InProcessGateway {
        let list = AddressList(ports.map { HostPort(host: "127.0.0.1", port: $0) })
        return try InProcessGateway(deployment) {
            $0.store = list.map { ServerLink.Endpoint($0) }
            $0.registryWaitMs = waitMs
        }
    }

    private func isReady(_ gateway: InProcessGateway) -> Bool { gateway.onLoop { $0.readiness() == .ready } ?? false }
    private func followedStore(_ gateway: InProcessGateway) -> Int? { gateway.onLoop { $0.follower?.currentStore.port } ?? nil }

    private func connectedDevice(_ gateway: InProcessGateway, _ credential: [UInt8]) throws -> BlockingWireClient {
        let client = try gateway.connect()
        guard case .helloOK = try client.hello(Hello(role: .device, credential: credential)) else {
            throw ServiceError.failed("device HELLO refused")
        }
        return client
    }

    @Test("the first store is dead at start: the registry loads through the second, after one failed connect and no backoff")
    func firstStoreDead() throws {
        let deployment = try TemporaryDeployment()
        let log = RegistryLog()
        let dead = try FakeRegistryStore(serverKey: deployment.deployment.serverKey, log: log)
        let deadPort = dead.port
        dead.stop()
        let live = try FakeRegistryStore(serverKey: deployment.deployment.serverKey, log: log)
        defer { live.stop() }
        let phone = deployment.registration("phone")
        log.record(.enrolled, phone)
        let started = Clocks.monotonicMilliseconds()
        let gateway = try gateway(deployment, stores: [deadPort, live.port])
        #expect(waitUntil { isReady(gateway) })
        #expect(Clocks.monotonicMilliseconds() - started < 1_500, "one refused connect, then the second store at once")
        #expect(followedStore(gateway) == live.port)
        _ = try connectedDevice(gateway, phone)
    }

    @Test("the followed store crashes: the follower moves to the other, goes on from its cursor, and a revocation there closes the device")
    func followedStoreCrashes() throws {
        let deployment = try TemporaryDeployment()
        let log = RegistryLog()  // one registry for both: what one database gives two stores
        let storeA = try FakeRegistryStore(serverKey: deployment.deployment.serverKey, log: log)
        let storeB = try FakeRegistryStore(serverKey: deployment.deployment.serverKey, log: log)
        defer { storeB.stop() }
        let phone = deployment.registration("phone")
        storeA.record(.enrolled, phone)
        let gateway = try gateway(deployment, stores: [storeA.port, storeB.port], waitMs: 20_000)
        #expect(waitUntil { isReady(gateway) })
        #expect(followedStore(gateway) == storeA.port)
        let device = try connectedDevice(gateway, phone)
        #expect(waitUntil { storeA.served.held > 0 }, "a long-polled REGISTRY waits at A")
        #expect(storeB.served.requests == 0)

        storeA.stop()
        #expect(waitUntil { followedStore(gateway) == storeB.port && storeB.served.requests > 0 })
        // B holds the first REGISTRY it gets: asked from A's cursor, nothing follows it.
        // From cursor 0 B would have answered at once with the enrolment.
        #expect(waitUntil { storeB.served.held == 1 })
        #expect(storeB.served.requests == 1)
        #expect(isReady(gateway), "served from the registry it loaded throughout")

        storeB.record(.revoked, phone)
        guard case .goaway(let goaway) = try device.nextPush(timeoutMs: 5_000).message else {
            Issue.record("no GOAWAY after the revocation at B")
            return
        }
        #expect(goaway.status == .revoked)
    }

    @Test("two real stores over one database: the followed one drains, the follower moves to the other at once, and `device revoke` still reaches the gateway")
    func followedStoreDrains() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let phone = try deployment.enroll("phone")
        let storeA = try InProcessStore(deployment)
        let storeB = try InProcessStore(deployment)
        let gateway = try gateway(deployment, stores: [storeA.port, storeB.port], waitMs: 20_000)
        #expect(waitUntil { isReady(gateway) })
        #expect(followedStore(gateway) == storeA.port)
        let device = try connectedDevice(gateway, phone)

        let drainedAt = Clocks.monotonicMilliseconds()
        storeA.stop()
        #expect(waitUntil { followedStore(gateway) == storeB.port && gateway.onLoop({ $0.metrics.text })?
                                .contains("securepush_gateway_registry_link_up 1") == true })
        #expect(Clocks.monotonicMilliseconds() - drainedAt < 2_000, "GOAWAY SHUTTING_DOWN moves the follower at once")

        try deployment.revoke("phone")  // into the database both stores serve, as `securepush device revoke` does
        guard case .goaway(let goaway) = try device.nextPush(timeoutMs: 5_000).message else {
            Issue.record("no GOAWAY after the revocation")
            return
        }
        #expect(goaway.status == .revoked)
    }

    @Test("securepush gateway --store DEAD,LIVE loads the registry through the live store; a malformed list is refused naming the element")
    func commandLine() throws {
        let deployment = try TemporaryDeployment(commandLine: true)
        let log = RegistryLog()
        let dead = try FakeRegistryStore(serverKey: deployment.deployment.serverKey, log: log)
        let deadPort = dead.port
        dead.stop()
        let live = try FakeRegistryStore(serverKey: deployment.deployment.serverKey, log: log)
        defer { live.stop() }
        let phone = deployment.registration("phone")
        log.record(.enrolled, phone)
        let gateway = try ServiceProcess(["gateway", "--data-dir", deployment.directory,
                                          "--store", "127.0.0.1:\(deadPort),127.0.0.1:\(live.port)"])
        defer { _ = gateway.terminate() }
        #expect(waitUntil {
            (try? gateway.connect().hello(Hello(role: .device, credential: phone)))?.type == .helloOK
        }, "\(gateway.standardErrorText())")
        #expect(gateway.standardErrorText().contains("127.0.0.1:\(deadPort),127.0.0.1:\(live.port)"),
                "the start line names the list")

        let bad = try SecurePushBinary.run(["gateway", "--data-dir", deployment.directory, "--listen", "127.0.0.1:0",
                                            "--store", "127.0.0.1:\(live.port),store-2"], timeoutSeconds: 20)
        #expect(bad.status != 0)
        #expect(bad.stderr.contains("address 2 of 2, 'store-2', is not HOST:PORT"), "\(bad.stderr)")
    }
}
