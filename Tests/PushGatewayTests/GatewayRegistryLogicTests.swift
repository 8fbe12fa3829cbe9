import Testing
import PushSecurity
import PushWire
@testable import PushGateway

/// `GatewayLogic` following a registry, fed REGISTRY_OK pages by hand, on clocks the test moves.
final class RegistryGatewayFixture {
    var maker = RegistrationMaker()
    var monotonic: Int64 = 1_000_000
    let logic: GatewayLogic
    let metrics = GatewayMetrics()
    private var cursor: UInt64 = 0

    init(queueCapacity: Int = 100, followsRegistry: Bool = true) {
        var settings = GatewaySettings()
        settings.queueCapacity = queueCapacity
        var wall: () -> UInt64 = { 0 }
        var clock: () -> Int64 = { 0 }
        logic = GatewayLogic(settings: settings, serverKey: maker.serverKey, metrics: metrics, followsRegistry: followsRegistry,
                             wallClock: { wall() }, monotonicClock: { clock() })
        wall = { [unowned self] in self.maker.nowMs }
        clock = { [unowned self] in self.monotonic }
    }

    /// One page from the store, the last of the load unless `hasMore`.
    @discardableResult
    func apply(_ entries: [RegistryEntry], hasMore: Bool = false) -> RegistryUpdate {
        cursor += UInt64(entries.count)
        let update = logic.applyRegistry(page(entries, cursor: cursor, hasMore: hasMore))
        lastActions = carryOut(logic)
        return update
    }

    /// The actions the last call through the fixture returned.
    var lastActions: [GatewayAction] = []

    /// A device's HELLO with `credential`, then HELLO_OK and its backlog, as the server does.
    func connect(_ credential: [UInt8]) -> (DeviceRecord, TestLink)? {
        guard case .admit(let registration) = logic.admitDevice(credential) else { return nil }
        let link = TestLink()
        let record = logic.connect(registration, link: link)
        link.record = record
        logic.deliverBacklog(record)
        lastActions = carryOut(logic)
        return (record, link)
    }

    func push(_ target: PushTarget, id: UInt8, ttl: UInt32 = 60) -> PushAck {
        let ack = logic.push(Push(target: target, id: [id], ttlSeconds: ttl))
        lastActions = carryOut(logic)
        return ack
    }

    /// The server reports that a connection closed.
    func disconnect(_ record: DeviceRecord, link: TestLink) {
        link.open = false
        logic.disconnect(record, link: link)
        lastActions = carryOut(logic)
    }

    /// A sample's value in the metrics text (`name{labels} value`).
    func sample(_ series: String) -> Int? {
        for line in metrics.registry.text.split(separator: "\n") where line.hasPrefix(series + " ") {
            return Int(line.dropFirst(series.count + 1))
        }
        return nil
    }
}

@Suite("Gateway logic with a device registry")
struct GatewayRegistryLogicTests {
    @Test("[7.4-4] device HELLOs get BUSY until the registry is loaded, then only enrolled registrations pass")
    func admission() {
        let gateway = RegistryGatewayFixture()
        let phone = gateway.maker.credential("phone")
        let stranger = gateway.maker.credential("stranger")
        gateway.apply([enrolled(phone)], hasMore: true)
        #expect(gateway.logic.admitDevice(phone) == .refuse(.busy, reply: "the gateway is loading its device registry; retry",
                                                            reason: "registration not checked: the device registry is not loaded yet"))
        #expect(!gateway.logic.isRegistryReady)
        gateway.apply([])
        #expect(gateway.logic.isRegistryReady)
        #expect(gateway.connect(phone) != nil)
        #expect(gateway.logic.admitDevice(stranger) == .refuse(.badCredentials, reply: "registration not enrolled", reason: "registration refused: not enrolled"))
        gateway.apply([revoked(phone)])
        #expect(gateway.logic.admitDevice(phone) == .refuse(.badCredentials, reply: "registration revoked", reason: "registration refused: revoked"))
        gateway.maker.nowMs += 86_400_000
        #expect(gateway.logic.admitDevice(phone) == .refuse(.badCredentials, reply: "registration refused", reason: "registration refused: expired"),
                "the MAC and expiry are checked first")
        #expect(gateway.sample("securepush_gateway_credentials_refused_total{role=\"device\",reason=\"not_enrolled\"}") == 1)
        #expect(gateway.sample("securepush_gateway_credentials_refused_total{role=\"device\",reason=\"revoked\"}") == 1)
        #expect(gateway.sample("securepush_gateway_credentials_refused_total{role=\"device\",reason=\"expired\"}") == 1)
        #expect(gateway.sample("securepush_gateway_hellos_before_registry_total") == 1)
        #expect(gateway.sample("securepush_gateway_registry_loaded") == 1)
    }

    @Test("[4.13-7] a push to an enrolled device that never connected is queued and delivered when it connects")
    func offlineEnrolled() throws {
        let gateway = RegistryGatewayFixture()
        let phone = gateway.maker.credential("phone")
        gateway.apply([enrolled(phone)])
        #expect(gateway.logic.devices.isEmpty, "no record before a push needs one")
        #expect(gateway.push(.device("phone"), id: 1) == PushAck(written: 0, queued: 1))
        #expect(gateway.push(.device("phone"), id: 2, ttl: 0) == PushAck(written: 0, queued: 0), "ttl 0: connected devices only")
        #expect(gateway.push(.device("stranger"), id: 3) == PushAck(written: 0, queued: 0))
        #expect(gateway.logic.devices.keys.sorted() == ["phone"])
        let (_, link) = try #require(gateway.connect(phone))
        #expect(link.pushes.map { $0.1.id } == [[1]])
    }

    @Test("[4.13-7] user and tag targets reach every enrolled device, online or not")
    func fanOut() throws {
        let gateway = RegistryGatewayFixture()
        let phone = gateway.maker.credential("phone", tags: ["news"])
        let tablet = gateway.maker.credential("tablet", tags: ["news"])
        let laptop = gateway.maker.credential("laptop")
        let bobs = gateway.maker.credential("bobs", user: "bob", tags: ["news"])
        gateway.apply([enrolled(phone), enrolled(tablet), enrolled(laptop), enrolled(bobs)])
        let (_, phoneLink) = try #require(gateway.connect(phone))
        #expect(gateway.push(.tag("news"), id: 1) == PushAck(written: 1, queued: 2))
        #expect(gateway.push(.user("alice"), id: 2) == PushAck(written: 1, queued: 2))
        #expect(phoneLink.pushes.map { $0.1.id } == [[1], [2]])
        let (_, tabletLink) = try #require(gateway.connect(tablet))
        #expect(tabletLink.pushes.map { $0.1.id } == [[1], [2]])
        let (_, bobsLink) = try #require(gateway.connect(bobs))
        #expect(bobsLink.pushes.map { $0.1.id } == [[1]])
    }

    @Test("[4.13-5] an enrolled offline device's queue keeps its capacity and TTL rules")
    func queueRules() throws {
        let gateway = RegistryGatewayFixture(queueCapacity: 2)
        let phone = gateway.maker.credential("phone")
        gateway.apply([enrolled(phone)])
        _ = gateway.push(.device("phone"), id: 1, ttl: 1)
        _ = gateway.push(.device("phone"), id: 2)
        _ = gateway.push(.device("phone"), id: 3)
        gateway.monotonic += 5_000
        let (_, link) = try #require(gateway.connect(phone))
        #expect(link.messages == [.missed(Missed(missedCount: 1))], "the oldest was dropped for room")
        #expect(link.pushes.map { $0.1.id } == [[2], [3]])
    }

    @Test("[7.4-6] revoking a connected device's registration closes it with GOAWAY REVOKED and drops its queue")
    func revokeConnected() throws {
        let gateway = RegistryGatewayFixture()
        let phone = gateway.maker.credential("phone")
        let tablet = gateway.maker.credential("tablet")
        gateway.apply([enrolled(phone), enrolled(tablet)])
        let (record, link) = try #require(gateway.connect(phone))
        _ = gateway.push(.device("phone"), id: 1)
        #expect(link.frames.count == 1)
        let update = gateway.apply([revoked(phone)])
        #expect(update.revokedDevices == ["phone"])
        #expect(gateway.lastActions == [.revoked(link)], "GOAWAY REVOKED")
        #expect(link.wasRevoked && !link.wasReplaced)
        #expect(!record.isOnline)
        #expect(gateway.logic.devices["phone"] == nil, "nothing kept for a revoked device")
        gateway.disconnect(record, link: link)  // the server reports the close later: no effect
        #expect(gateway.push(.user("alice"), id: 2) == PushAck(written: 0, queued: 1), "only the tablet")
        #expect(gateway.sample("securepush_gateway_devices_online") == 0)
        #expect(gateway.sample("securepush_gateway_devices_revoked_total") == 1)
        #expect(gateway.sample("securepush_gateway_registry_revocations_total") == 1)
        #expect(gateway.sample("securepush_gateway_pushes_revoked_total") == 1, "the unacknowledged push")
        #expect(gateway.sample("securepush_gateway_registry_entries{state=\"enrolled\"}") == 1)
        #expect(gateway.sample("securepush_gateway_registry_entries{state=\"revoked\"}") == 1)
    }

    @Test("revoking an offline device's registration drops its queue")
    func revokeOffline() {
        let gateway = RegistryGatewayFixture()
        let phone = gateway.maker.credential("phone")
        gateway.apply([enrolled(phone)])
        _ = gateway.push(.device("phone"), id: 1)
        _ = gateway.push(.device("phone"), id: 2)
        gateway.apply([revoked(phone)])
        #expect(gateway.logic.devices["phone"] == nil)
        #expect(gateway.sample("securepush_gateway_pushes_revoked_total") == 2)
        #expect(gateway.push(.device("phone"), id: 3) == PushAck(written: 0, queued: 0))
    }

    @Test("a newer enrolment of the device id closes the old connection; the queue stays for the same user")
    func reenrolled() throws {
        let gateway = RegistryGatewayFixture()
        let old = gateway.maker.credential("phone", tags: ["a"])
        gateway.apply([enrolled(old)])
        let (_, oldLink) = try #require(gateway.connect(old))
        oldLink.open = false  // it reads nothing more; the push waits in the queue
        let new = gateway.maker.credential("phone", tags: ["b"], issuedAt: gateway.maker.nowMs + 1)
        gateway.apply([enrolled(new), revoked(old)])
        #expect(oldLink.wasRevoked)
        #expect(gateway.push(.tag("b"), id: 1) == PushAck(written: 0, queued: 1))
        #expect(gateway.push(.tag("a"), id: 2) == PushAck(written: 0, queued: 0))
        #expect(gateway.logic.admitDevice(old) == .refuse(.badCredentials, reply: "registration revoked", reason: "registration refused: revoked"))
        let (_, newLink) = try #require(gateway.connect(new))
        #expect(newLink.pushes.map { $0.1.id } == [[1]])
    }

    @Test("a device enrolled again for another user loses what was queued for the first")
    func reenrolledOtherUser() throws {
        let gateway = RegistryGatewayFixture()
        let old = gateway.maker.credential("phone")
        gateway.apply([enrolled(old)])
        _ = gateway.push(.device("phone"), id: 1)
        let new = gateway.maker.credential("phone", user: "bob", issuedAt: gateway.maker.nowMs + 1)
        gateway.apply([enrolled(new), revoked(old)])
        #expect(gateway.push(.user("alice"), id: 2) == PushAck(written: 0, queued: 0))
        let (_, link) = try #require(gateway.connect(new))
        #expect(link.pushes.isEmpty, "alice's push does not go to bob's device")
    }

    @Test("expired registrations match no target and their offline queues go")
    func expiry() throws {
        let gateway = RegistryGatewayFixture()
        let phone = gateway.maker.credential("phone", lifetimeMs: 60_000)
        let tablet = gateway.maker.credential("tablet", lifetimeMs: 60_000)
        gateway.apply([enrolled(phone), enrolled(tablet)])
        let (_, link) = try #require(gateway.connect(tablet))
        _ = gateway.push(.device("phone"), id: 1)
        gateway.maker.nowMs += 60_000
        #expect(gateway.push(.user("alice"), id: 2) == PushAck(written: 0, queued: 0))
        #expect(Set(gateway.logic.removeExpiredRegistrations()) == ["phone", "tablet"])
        #expect(gateway.logic.actions.isEmpty)
        #expect(gateway.logic.devices["phone"] == nil)
        #expect(!link.wasRevoked && gateway.logic.devices["tablet"]?.isOnline == true,
                "a connection admitted while its registration was good is not cut off at expiry")
    }

    @Test("without a registry: any signed registration connects and targets match devices seen since the start (SPEC 1.1)")
    func withoutRegistry() throws {
        let gateway = RegistryGatewayFixture(followsRegistry: false)
        #expect(gateway.logic.isRegistryReady && gateway.logic.registry == nil && gateway.logic.registryMetrics == nil)
        #expect(gateway.push(.device("phone"), id: 1) == PushAck(written: 0, queued: 0))
        let (record, link) = try #require(gateway.connect(gateway.maker.credential("phone", tags: ["t"])))
        gateway.disconnect(record, link: link)
        #expect(gateway.push(.tag("t"), id: 2) == PushAck(written: 0, queued: 1))
        #expect(gateway.logic.applyRegistry(page([], cursor: 1)) == RegistryUpdate(), "a REGISTRY_OK is ignored")
        #expect(!gateway.metrics.registry.text.contains("securepush_gateway_registry_loaded"))
    }
}
