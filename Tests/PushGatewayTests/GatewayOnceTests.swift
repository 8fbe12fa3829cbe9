import Testing
import PushSecurity
import PushWire
@testable import PushGateway

extension GatewayFixture {
    /// A provider's PUSH with `user` and `once` (revision 1.3).
    func send(_ target: PushTarget, id: UInt8, user: String? = nil, once: Bool = false, ttl: UInt32 = 60) -> PushAck {
        let ack = logic.push(Push(target: target, id: [id], ttlSeconds: ttl, user: user, once: once))
        lastActions = carryOut(logic)
        return ack
    }
}

extension RegistryGatewayFixture {
    func send(_ target: PushTarget, id: UInt8, user: String? = nil, once: Bool = false, ttl: UInt32 = 60) -> PushAck {
        let ack = logic.push(Push(target: target, id: [id], ttlSeconds: ttl, user: user, once: once))
        lastActions = carryOut(logic)
        return ack
    }
}

/// PUSH's `user` and `once` (SPEC.md revision 1.3) in the gateway's logic, without sockets,
/// on a monotonic clock the tests move.
@Suite("Gateway logic: PUSH's user and once")
struct GatewayOnceTests {
    static func ids(_ link: TestLink) -> [[UInt8]] { link.pushes.map { $0.1.id } }

    // MARK: user

    @Test("[4.13-11] with user, a device, user or tag target matches only that user's devices (no registry)")
    func userWithoutRegistry() {
        let gateway = GatewayFixture()
        let (_, phone) = gateway.connect("phone", tags: ["news"])
        let (_, tablet) = gateway.connect("tablet")
        let (_, bobs) = gateway.connect("bobs", user: "bob", tags: ["news"])
        let (bobsOld, bobsOldLink) = gateway.connect("bobs-old", user: "bob")
        gateway.disconnect(bobsOld, link: bobsOldLink)

        #expect(gateway.send(.device("phone"), id: 1, user: "alice") == PushAck(written: 1, queued: 0))
        #expect(gateway.send(.device("bobs"), id: 2, user: "alice") == PushAck(written: 0, queued: 0), "bob's device")
        #expect(gateway.send(.device("bobs-old"), id: 3, user: "alice") == PushAck(written: 0, queued: 0), "bob's, offline: not queued")
        #expect(gateway.send(.user("alice"), id: 4, user: "alice") == PushAck(written: 2, queued: 0))
        #expect(gateway.send(.user("bob"), id: 5, user: "alice") == PushAck(written: 0, queued: 0), "another user's target")
        #expect(gateway.send(.tag("news"), id: 6, user: "alice") == PushAck(written: 1, queued: 0), "the tag's devices of alice only")
        #expect(gateway.send(.tag("news"), id: 7, user: "bob") == PushAck(written: 1, queued: 0))
        #expect(gateway.send(.tag("news"), id: 8) == PushAck(written: 2, queued: 0), "without user, every device with the tag")

        #expect(Self.ids(phone) == [[1], [4], [6], [8]])
        #expect(Self.ids(tablet) == [[4]])
        #expect(Self.ids(bobs) == [[7], [8]])
        #expect(bobsOld.queue.isEmpty)
        #expect(phone.pushes.allSatisfy { $0.1.user == nil && !$0.1.once }, "[4.14-1] devices get neither user nor once")
    }

    @Test("[4.13-11] the registration of the latest HELLO names the user: a device that connects again for another user")
    func userFollowsLatestHello() {
        let gateway = GatewayFixture()
        gateway.connect("shared", user: "alice")
        let (_, link) = gateway.connect("shared", user: "bob")
        #expect(gateway.send(.device("shared"), id: 1, user: "alice") == PushAck(written: 0, queued: 0))
        #expect(gateway.send(.device("shared"), id: 2, user: "bob") == PushAck(written: 1, queued: 0))
        #expect(Self.ids(link) == [[2]])
    }

    @Test("[4.13-11] [4.13-7] with a registry, user restricts the enrolled devices a target matches, connected or not")
    func userWithRegistry() throws {
        let gateway = RegistryGatewayFixture()
        let phone = gateway.maker.credential("phone", tags: ["news"])
        let laptop = gateway.maker.credential("laptop", tags: ["news"])
        let bobs = gateway.maker.credential("bobs", user: "bob", tags: ["news"])
        gateway.apply([enrolled(phone), enrolled(laptop), enrolled(bobs)])
        let (_, phoneLink) = try #require(gateway.connect(phone))

        #expect(gateway.send(.tag("news"), id: 1, user: "alice") == PushAck(written: 1, queued: 1), "phone written, laptop queued")
        #expect(gateway.send(.device("bobs"), id: 2, user: "alice") == PushAck(written: 0, queued: 0))
        #expect(gateway.send(.user("bob"), id: 3, user: "alice") == PushAck(written: 0, queued: 0))
        #expect(gateway.send(.user("bob"), id: 4, user: "bob") == PushAck(written: 0, queued: 1))
        #expect(gateway.send(.user("alice"), id: 5, user: "alice") == PushAck(written: 1, queued: 1))
        #expect(Self.ids(phoneLink) == [[1], [5]])

        let (_, bobsLink) = try #require(gateway.connect(bobs))
        #expect(Self.ids(bobsLink) == [[4]], "of the pushes for bob's devices, only the one for bob")
        let (_, laptopLink) = try #require(gateway.connect(laptop))
        #expect(Self.ids(laptopLink) == [[1], [5]])
    }

    // MARK: once

    @Test("[4.13-12] a repeat is answered with the first counts and written to no connected device again")
    func repeatToConnectedDevices() {
        let gateway = GatewayFixture()
        let (phoneRecord, phone) = gateway.connect("phone")
        let (_, tablet) = gateway.connect("tablet")
        #expect(gateway.send(.user("alice"), id: 1, once: true) == PushAck(written: 2, queued: 0))
        #expect(gateway.send(.user("alice"), id: 1, once: true) == PushAck(written: 2, queued: 0), "the first counts")
        #expect(gateway.lastActions.isEmpty, "nothing written")
        // Acknowledged or not, the id is the same push.
        gateway.acknowledge(phoneRecord, correlation: phone.pushes[0].0, id: [1])
        #expect(gateway.send(.user("alice"), id: 1, once: true) == PushAck(written: 2, queued: 0))
        #expect(gateway.send(.device("phone"), id: 1, once: true) == PushAck(written: 2, queued: 0),
                "remembered by id: a repeat is answered with the first counts whatever its target")
        #expect(Self.ids(phone) == [[1]] && Self.ids(tablet) == [[1]])
        #expect(gateway.counter("securepush_gateway_pushes_repeated_total") == 3)
        #expect(gateway.counter("securepush_gateway_pushes_accepted_total") == 4, "a repeat is accepted, and answered")
        #expect(gateway.counter("securepush_gateway_pushes_written_total") == 2)
    }

    @Test("[4.13-12] a repeat for an offline device is not queued again")
    func repeatToOfflineDevice() {
        let gateway = GatewayFixture()
        let (record, first) = gateway.connect("phone")
        gateway.disconnect(record, link: first)
        #expect(gateway.send(.device("phone"), id: 7, once: true) == PushAck(written: 0, queued: 1))
        #expect(gateway.send(.device("phone"), id: 7, once: true) == PushAck(written: 0, queued: 1))
        #expect(gateway.send(.device("phone"), id: 7, once: true, ttl: 0) == PushAck(written: 0, queued: 1), "by id, whatever its ttl")
        #expect(record.queue.count == 1)
        #expect(gateway.counter("securepush_gateway_pushes_queued_total") == 1)
        let (_, again) = gateway.connect("phone")
        #expect(Self.ids(again) == [[7]])
    }

    @Test("[4.13-12] [4.13-10] a repeat for a device behind its full window is not queued again")
    func repeatBehindTheWindow() {
        let gateway = GatewayFixture(window: 1)
        let (record, link) = gateway.connect("phone")
        #expect(gateway.send(.device("phone"), id: 1) == PushAck(written: 1, queued: 0))
        #expect(gateway.send(.device("phone"), id: 2, once: true) == PushAck(written: 0, queued: 1))
        #expect(gateway.send(.device("phone"), id: 2, once: true) == PushAck(written: 0, queued: 1))
        #expect(record.queue.count == 1)
        gateway.acknowledge(record, correlation: link.pushes[0].0, id: [1])
        #expect(Self.ids(link) == [[1], [2]])
        // Written now: still answered with the counts it was first answered with.
        #expect(gateway.send(.device("phone"), id: 2, once: true) == PushAck(written: 0, queued: 1))
        #expect(Self.ids(link) == [[1], [2]] && record.queue.isEmpty)
    }

    @Test("[4.13-12] a PUSH with once 0 is always new, and does not make a once 1 PUSH of its id a repeat")
    func onceZeroIsNew() {
        let gateway = GatewayFixture()
        let (_, link) = gateway.connect("phone")
        #expect(gateway.send(.device("phone"), id: 5) == PushAck(written: 1, queued: 0))
        #expect(gateway.send(.device("phone"), id: 5, once: true) == PushAck(written: 1, queued: 0), "not remembered from once 0")
        #expect(gateway.send(.device("phone"), id: 5) == PushAck(written: 1, queued: 0), "once 0 after once 1: new")
        #expect(gateway.send(.device("phone"), id: 5, once: true) == PushAck(written: 1, queued: 0), "from memory")
        #expect(Self.ids(link) == [[5], [5], [5]])
        #expect(gateway.counter("securepush_gateway_pushes_repeated_total") == 1)
    }

    @Test("[4.13-12] an ordinary push leaves nothing in the memory")
    func ordinaryPushesAreNotRemembered() {
        let gateway = GatewayFixture()
        gateway.connect("phone")
        for id in 1...20 { _ = gateway.send(.device("phone"), id: UInt8(id)) }
        #expect(gateway.logic.once.count == 0)
        #expect(gateway.counter("securepush_gateway_once_ids_remembered") == 0)
        #expect(MemoryLayout<QueuedPush>.size <= 64, "once fits in QueuedPush's padding")
    }

    @Test("[4.13-12] an id is remembered for 300 s on the monotonic clock, then a PUSH of it is new")
    func windowExpires() {
        let gateway = GatewayFixture()
        let (record, link) = gateway.connect("phone")
        let start = gateway.now
        #expect(gateway.send(.device("phone"), id: 1, once: true) == PushAck(written: 1, queued: 0))
        gateway.now = start + 150_000
        #expect(gateway.send(.device("phone"), id: 2, once: true) == PushAck(written: 1, queued: 0))
        gateway.now = start + 300_000
        #expect(gateway.send(.device("phone"), id: 1, once: true) == PushAck(written: 1, queued: 0))
        #expect(Self.ids(link) == [[1], [2]], "300 s after: still remembered ([4.13-12]: at least 300 s)")
        #expect(gateway.counter("securepush_gateway_once_ids_remembered") == 2)
        gateway.now = start + 300_001
        gateway.disconnect(record, link: link)
        #expect(gateway.send(.device("phone"), id: 1, once: true, ttl: 600) == PushAck(written: 0, queued: 1), "new, with new counts")
        #expect(gateway.counter("securepush_gateway_once_ids_remembered") == 2, "id 1 again, and id 2")
        gateway.now = start + 450_001
        #expect(gateway.send(.device("phone"), id: 2, once: true, ttl: 600) == PushAck(written: 0, queued: 1), "id 2's window is up too")
        #expect(gateway.send(.device("phone"), id: 1, once: true, ttl: 600) == PushAck(written: 0, queued: 1), "id 1 remembered anew")
        #expect(record.queue.count == 2)
    }

    @Test("[4.13-12] past its bound the memory forgets the oldest id first")
    func boundEvictsOldest() {
        let gateway = GatewayFixture(onceMemory: 3)
        let (_, link) = gateway.connect("phone")
        for id: UInt8 in 1...4 { #expect(gateway.send(.device("phone"), id: id, once: true) == PushAck(written: 1, queued: 0)) }
        #expect(gateway.counter("securepush_gateway_once_ids_remembered") == 3)
        _ = gateway.send(.device("phone"), id: 4, once: true)
        _ = gateway.send(.device("phone"), id: 2, once: true)
        #expect(Self.ids(link) == [[1], [2], [3], [4]], "2 and 4 remembered")
        _ = gateway.send(.device("phone"), id: 1, once: true)
        #expect(Self.ids(link) == [[1], [2], [3], [4], [1]], "1, the oldest, was forgotten: new")
        _ = gateway.send(.device("phone"), id: 2, once: true)
        #expect(Self.ids(link).count == 6, "remembering 1 again forgot 2, the oldest then")
        _ = gateway.send(.device("phone"), id: 3, once: true)
        #expect(Self.ids(link).count == 7, "and 2 forgot 3")
        _ = gateway.send(.device("phone"), id: 1, once: true)
        #expect(Self.ids(link).count == 7, "1 is still remembered")
        #expect(gateway.counter("securepush_gateway_once_ids_remembered") == 3)
    }

    @Test("[4.13-12] the metrics have HELP text")
    func metricsHelp() {
        let text = GatewayFixture().metrics.registry.text
        #expect(text.contains("# HELP securepush_gateway_pushes_repeated_total "))
        #expect(text.contains("# TYPE securepush_gateway_pushes_repeated_total counter"))
        #expect(text.contains("# HELP securepush_gateway_once_ids_remembered "))
        #expect(text.contains("# TYPE securepush_gateway_once_ids_remembered gauge"))
    }

    // MARK: several loops

    /// The loops of one gateway, as logics with their placements: what `LoopForwarding`
    /// does with a `.forward(to: .loop(k))` (the same `Push` to loop k's `route`, its
    /// counts added to the PUSH_ACK) is done here by hand.
    final class Loops {
        let loops: [GatewayFixture]

        init(count: Int) {
            loops = (0..<count).map { index in
                let fixture = GatewayFixture()
                fixture.logic.placement = LoopPlacement(index: index, count: count)
                return fixture
            }
        }

        func home(of deviceID: String) -> GatewayFixture { loops[LoopPlacement.home(of: deviceID, count: loops.count)] }

        /// A PUSH entering at loop `entry`, its counts summed over the loops it reaches.
        func push(_ push: Push, at entry: Int) -> PushAck {
            let logic = loops[entry].logic
            var ack = logic.push(push)
            for case .forward(to: .loop(let index)) in carryOut(logic) {
                let part = loops[index].logic.route(push)
                _ = carryOut(loops[index].logic)
                ack.written += part.written
                ack.queued += part.queued
            }
            return ack
        }
    }

    @Test("[4.13-12] [4.13-11] on several loops a repeat entering at another loop gets the summed first counts, delivered nowhere again")
    func severalLoops() {
        let gateway = Loops(count: 4)
        let ids = (0..<16).map { "bob-\($0)" }
        #expect(Set(ids.map { LoopPlacement.home(of: $0, count: 4) }).count == 4, "devices on every loop")
        var links: [TestLink] = []
        for (index, id) in ids.enumerated() {
            let home = gateway.home(of: id)
            let (record, link) = home.connect(id, user: "bob", tags: ["news"])
            if index % 4 == 0 { home.disconnect(record, link: link) } else { links.append(link) }
        }
        let alices = gateway.home(of: "alice-1").connect("alice-1", tags: ["news"]).1

        let push = Push(target: .tag("news"), id: [9], user: "bob", once: true)
        let first = gateway.push(push, at: 0)
        #expect(first == PushAck(written: 12, queued: 4))
        for entry in 1..<4 { #expect(gateway.push(push, at: entry) == first, "entering at loop \(entry)") }
        #expect(links.allSatisfy { Self.ids($0) == [[9]] }, "each connected device once")
        #expect(alices.frames.isEmpty, "alice's device has the tag but is not bob's")
        #expect(ids.enumerated().filter { $0.offset % 4 == 0 }.allSatisfy { gateway.home(of: $0.element).logic.devices[ExactName($0.element)]?.queue.count == 1 })

        // A device target goes to its home loop alone, wherever it enters.
        let unicast = Push(target: .device("bob-1"), id: [10], once: true)
        #expect(gateway.push(unicast, at: 0) == PushAck(written: 1, queued: 0))
        for entry in 0..<4 { #expect(gateway.push(unicast, at: entry) == PushAck(written: 1, queued: 0)) }
        #expect(Self.ids(gateway.home(of: "bob-1").logic.devices["bob-1"]!.link as! TestLink) == [[9], [10]])
    }
}
