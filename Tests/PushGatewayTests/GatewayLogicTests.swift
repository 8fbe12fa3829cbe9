import Testing
import PushSecurity
import PushWire
@testable import PushGateway

/// A device's connection as the tests' driver keeps it: the logic reads its output room,
/// and `carryOut(_:)` puts the logic's actions onto it, as `GatewayServer` does onto a
/// socket. The logic never calls it.
final class TestLink: DeviceLink {
    /// What the driver wrote to it.
    var frames: [[UInt8]] = []
    var messages: [Message] = []
    /// Whether it takes writes.
    var open = true
    var wasReplaced = false
    var wasRevoked = false
    var wasCutOff = false
    /// Bytes its output holds before the cap; nil for no cap. `read()` empties it.
    var capBytes: Int?
    /// Bytes in the output the device has not read.
    private(set) var unreadBytes = 0
    /// Like a connection that fails where the logic cannot foresee it (an allocation, say):
    /// the write after this many frames closes it and is lost, and the driver reports the
    /// close once the actions are carried out.
    var failBeyond: Int?
    /// The device it serves, for reporting its close.
    var record: DeviceRecord?

    var outputRoom: Int? {
        guard open else { return nil }
        guard let capBytes else { return 1 << 30 }
        return capBytes - unreadBytes
    }

    /// The device read everything written so far.
    func read() {
        takenBytes += UInt64(unreadBytes)
        unreadBytes = 0
    }

    /// Bytes the device has read since the link opened.
    private(set) var takenBytes: UInt64 = 0
    /// What the stall check asks for: the device's side takes exactly what it reads here.
    var outputProgress: LinkOutput? {
        open ? LinkOutput(notTaken: unreadBytes, taken: takenBytes) : nil
    }
    var wasStalled = false

    /// Frames and messages written.
    private(set) var writes = 0

    /// Queues `size` bytes in its output; false when it is closed or fails now.
    func take(_ size: Int) -> Bool {
        guard open else { return false }
        if let failBeyond, writes >= failBeyond {
            open = false
            return false
        }
        if let capBytes, unreadBytes + size > capBytes {
            Issue.record("the logic wrote past the output cap, where the connection would have cut the device off")
        }
        writes += 1
        unreadBytes += size
        return true
    }

    /// The PUSH frames written, decoded: (correlation, push).
    var pushes: [(UInt32, Push)] {
        frames.compactMap { frame in
            var decoder = FrameDecoder()
            decoder.feed(frame)
            guard let decoded = try? decoder.next(), case .push(let push)? = try? Message.decode(decoded) else { return nil }
            return (decoded.header.correlation, push)
        }
    }
}

/// Carries out the logic's actions onto `TestLink`s, as `GatewayServer` does onto sockets:
/// a link that fails a write is reported to the logic afterwards. Returns the actions.
@discardableResult
func carryOut(_ logic: GatewayLogic) -> [GatewayAction] {
    var done: [GatewayAction] = []
    var failed: [TestLink] = []
    logic.carryOut { action in
        done.append(action)
        if case .forward = action { return }
        guard let link = action.link as? TestLink else {
            Issue.record("not a test link")
            return
        }
        switch action {
        case .push(_, let frame):
            guard link.open else { return }
            guard link.take(frame.count) else { return failed.append(link) }
            link.frames.append(frame)
        case .missed(_, let missed):
            guard link.open else { return }
            var frame: [UInt8] = []
            Message.missed(missed).encode(correlation: 0, into: &frame)
            guard link.take(frame.count) else { return failed.append(link) }
            link.messages.append(.missed(missed))
        case .replaced:
            link.wasReplaced = true
            link.open = false
        case .revoked:
            link.wasRevoked = true
            link.open = false
        case .cutOff:
            link.wasCutOff = true
            link.open = false
        case .stalled:
            link.wasStalled = true
            link.open = false
        case .forward:
            break
        }
    }
    for link in failed {
        if let record = link.record { logic.disconnect(record, link: link) }
    }
    if !logic.actions.isEmpty { done += carryOut(logic) }
    return done
}

final class GatewayFixture {
    let serverKey = SecretKey(bytes: Array(repeating: 3, count: 32))!
    var now: Int64 = 1_000_000
    let logic: GatewayLogic
    let metrics = GatewayMetrics()

    init(queueCapacity: Int = 100, window: Int = 64, windowBytes: Int = 64 * 1024, onceMemory: Int = 100_000,
         outputStallMs: Int64 = 10_000) {
        var settings = GatewaySettings()
        settings.outputStallMs = outputStallMs
        settings.queueCapacity = queueCapacity
        settings.deliveryWindow = window
        settings.maxOutputBytes = windowBytes
        settings.onceMemory = onceMemory
        var clock: () -> Int64 = { 0 }
        logic = GatewayLogic(settings: settings, serverKey: serverKey, metrics: metrics,
                             wallClock: { 1_700_000_000_000 }, monotonicClock: { clock() })
        clock = { [unowned self] in self.now }
    }

    /// A counter's value, from the metrics in the Prometheus text format.
    func counter(_ name: String) -> Int? {
        for line in metrics.registry.text.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Int(line.dropFirst(name.count + 1))
        }
        return nil
    }

    func registration(_ device: String, user: String = "alice", tags: [String] = []) -> Registration {
        Registration(deviceID: device, user: user, tags: tags, issuedAt: 0, expiresAt: .max)
    }

    /// HELLO_OK and the backlog, as the server does.
    @discardableResult
    func connect(_ device: String, user: String = "alice", tags: [String] = [], link: TestLink = TestLink()) -> (DeviceRecord, TestLink) {
        let record = logic.connect(registration(device, user: user, tags: tags), link: link)
        link.record = record
        logic.deliverBacklog(record)
        lastActions = carryOut(logic)
        return (record, link)
    }

    /// The size of the frame `push` writes for a one-byte id.
    func frameSize(ttl: UInt32 = 60) -> Int {
        Push(target: .device("phone"), id: [1], ttlSeconds: ttl).deviceFrame(correlation: 1).count
    }

    /// The actions the last call through the fixture returned.
    var lastActions: [GatewayAction] = []

    func push(_ target: PushTarget, id: UInt8, ttl: UInt32 = 60, collapse: String? = nil, priority: UInt8 = 5) -> PushAck {
        let ack = logic.push(Push(target: target, id: [id], priority: priority, collapseKey: collapse, ttlSeconds: ttl))
        lastActions = carryOut(logic)
        return ack
    }

    func acknowledge(_ record: DeviceRecord, correlation: UInt32, id: [UInt8]) {
        logic.deliveryAcknowledged(record, correlation: correlation, id: id)
        lastActions = carryOut(logic)
    }

    /// The server reports that a connection closed.
    func disconnect(_ record: DeviceRecord, link: TestLink) {
        link.open = false
        logic.disconnect(record, link: link)
        lastActions = carryOut(logic)
    }
}

@Suite("Gateway logic")
struct GatewayLogicTests {
    @Test("[4.13-3] [4.13-4] a push reaches one device, every device of a user, or every device with a tag")
    func routing() {
        let gateway = GatewayFixture()
        let (_, phone) = gateway.connect("phone", tags: ["news"])
        let (_, tablet) = gateway.connect("tablet")
        let (_, laptop) = gateway.connect("laptop", tags: ["news"])
        let (_, other) = gateway.connect("bobs", user: "bob", tags: ["news"])
        #expect(gateway.push(.device("tablet"), id: 1) == PushAck(written: 1, queued: 0))
        #expect(gateway.push(.user("alice"), id: 2) == PushAck(written: 3, queued: 0))
        #expect(gateway.push(.tag("news"), id: 3) == PushAck(written: 3, queued: 0))
        #expect(gateway.push(.user("nobody"), id: 4) == PushAck(written: 0, queued: 0))
        #expect(phone.pushes.map { $0.1.id } == [[2], [3]])
        #expect(tablet.pushes.map { $0.1.id } == [[1], [2]])
        #expect(laptop.pushes.map { $0.1.id } == [[2], [3]])
        #expect(other.pushes.map { $0.1.id } == [[3]])
        #expect(phone.pushes.allSatisfy { $0.1.target == nil }, "[4.14-1] devices get no target")
        #expect(phone.frames[1] == laptop.frames[1], "a fan-out writes the same encoded bytes to each device")
    }

    @Test("[4.13-5] an offline device's queue: TTL, collapse, priority order, overflow and MISSED")
    func offlineQueue() {
        let gateway = GatewayFixture(queueCapacity: 3)
        let (record, first) = gateway.connect("phone")
        gateway.disconnect(record, link: first)
        #expect(gateway.push(.device("phone"), id: 1, ttl: 1) == PushAck(written: 0, queued: 1))
        #expect(gateway.push(.device("phone"), id: 2, collapse: "score") == PushAck(written: 0, queued: 1))
        #expect(gateway.push(.device("phone"), id: 3, collapse: "score") == PushAck(written: 0, queued: 1))
        #expect(gateway.push(.device("phone"), id: 4, ttl: 0) == PushAck(written: 0, queued: 0), "ttl 0: connected devices only")
        gateway.now += 2_000  // push 1 expires
        _ = gateway.push(.device("phone"), id: 5, priority: 9)
        _ = gateway.push(.device("phone"), id: 6)
        _ = gateway.push(.device("phone"), id: 7)  // over capacity: the oldest (3) is dropped
        let (_, second) = gateway.connect("phone")
        #expect(second.messages == [.missed(Missed(missedCount: 2))], "one expired, one dropped for room")
        #expect(second.pushes.map { $0.1.id } == [[5], [6], [7]], "higher priority first, then arrival order")
    }

    @Test("[4.14-3] an unacknowledged push is delivered again on reconnect; an acknowledged one is not")
    func redelivery() {
        let gateway = GatewayFixture()
        let (record, first) = gateway.connect("phone")
        _ = gateway.push(.device("phone"), id: 1)
        _ = gateway.push(.device("phone"), id: 2)
        gateway.acknowledge(record, correlation: first.pushes[0].0, id: [1])
        gateway.disconnect(record, link: first)
        let (_, second) = gateway.connect("phone")
        #expect(second.pushes.map { $0.1.id } == [[2]])
        #expect(second.pushes[0].0 == first.pushes[1].0, "the same correlation id, so the ACK still matches")
    }

    @Test("[4.13-3] a fan-out asks for one write per device, all of one encoded frame; the logic writes nothing itself")
    func fanOutActions() {
        let gateway = GatewayFixture()
        let (_, phone) = gateway.connect("phone", tags: ["news"])
        let (_, laptop) = gateway.connect("laptop", tags: ["news"])
        gateway.connect("tablet")
        _ = gateway.logic.push(Push(target: .tag("news"), id: [1]))
        let actions = gateway.logic.actions
        #expect(phone.frames.isEmpty && laptop.frames.isEmpty, "nothing written before the driver carries the actions out")
        #expect(Set(actions.compactMap { $0.link.map(ObjectIdentifier.init) }) == [ObjectIdentifier(phone), ObjectIdentifier(laptop)])
        let frames = actions.compactMap { action -> [UInt8]? in
            if case .push(_, let frame) = action { return frame }
            return nil
        }
        #expect(frames.count == 2)
        let storage = frames.map { $0.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) } }
        #expect(Set(storage).count == 1, "one encode: every write hands over the same array")
        #expect(carryOut(gateway.logic) == actions)
        #expect(gateway.logic.actions.isEmpty && phone.frames == [frames[0]] && laptop.frames == [frames[0]])
    }

    @Test("[4.13-3] on a gateway of several loops, a device target goes to its home loop only, a user or tag target to every other loop too")
    func forwardsToOtherLoops() throws {
        let gateway = GatewayFixture()
        let placement = LoopPlacement(index: 0, count: 3)
        gateway.logic.placement = placement
        let ids = (0..<64).map { "device-\($0)" }
        let here = try #require(ids.first { placement.home(of: $0) == 0 })
        let there = try #require(ids.first { placement.home(of: $0) == 2 })
        let (_, link) = gateway.connect(here)
        #expect(gateway.push(.device(there), id: 1) == PushAck(written: 0, queued: 0))
        #expect(gateway.lastActions == [.forward(to: .loop(2))], "its home loop counts it")
        #expect(gateway.push(.device(here), id: 2) == PushAck(written: 1, queued: 0))
        #expect(gateway.lastActions == [.push(link, frame: link.frames[0])], "delivered here, sent nowhere else")
        #expect(gateway.push(.user("alice"), id: 3) == PushAck(written: 1, queued: 0))
        #expect(gateway.lastActions == [.push(link, frame: link.frames[1]), .forward(to: .loop(1)), .forward(to: .loop(2))])
    }

    @Test("[5.5-3] a second connection with the same device id replaces the first")
    func replacement() {
        let gateway = GatewayFixture()
        let (_, first) = gateway.connect("phone")
        let (_, second) = gateway.connect("phone")
        #expect(gateway.lastActions == [.replaced(first)], "GOAWAY REPLACED for the older connection")
        #expect(first.wasReplaced && !second.wasReplaced)
        #expect(gateway.push(.user("alice"), id: 1) == PushAck(written: 1, queued: 0))
        #expect(first.frames.isEmpty && second.frames.count == 1)
    }

    @Test("a registration that moved to another user is routed by its new user")
    func reregistration() {
        let gateway = GatewayFixture()
        gateway.connect("phone", user: "alice", tags: ["a"])
        gateway.connect("phone", user: "bob", tags: ["b"])
        #expect(gateway.push(.user("alice"), id: 1) == PushAck(written: 0, queued: 0))
        #expect(gateway.push(.tag("a"), id: 1) == PushAck(written: 0, queued: 0))
        #expect(gateway.push(.user("bob"), id: 1) == PushAck(written: 1, queued: 0))
    }

    @Test("a link that takes no more writes (closing) gets the push queued instead")
    func cutOffQueues() {
        let gateway = GatewayFixture()
        let (_, link) = gateway.connect("phone")
        link.open = false
        #expect(gateway.push(.device("phone"), id: 1) == PushAck(written: 0, queued: 1))
    }

    @Test("[7.4-4] registrations are verified under the registration key")
    func registrationCheck() {
        let gateway = GatewayFixture()
        let signer = CredentialSigner(serverKey: gateway.serverKey, purpose: CredentialSigner.registrationPurpose)
        let good = gateway.registration("phone").signed(by: signer)
        guard case .admit(let registration) = gateway.logic.admitDevice(good) else { Issue.record("refused"); return }
        #expect(registration.deviceID == "phone")
        let tokenSigner = CredentialSigner(serverKey: gateway.serverKey, purpose: CredentialSigner.fetchTokenPurpose)
        #expect(gateway.logic.admitDevice(gateway.registration("phone").signed(by: tokenSigner))
                == .refuse(.badCredentials, reply: "registration refused", reason: "registration refused: bad (credential signature does not verify)"),
                "a fetch-token key verified a registration")
        #expect(gateway.logic.admitDevice(nil) == .refuse(.badRequest, reply: "a device must send its registration", reason: "registration refused: missing"))
    }

    @Test("sequence order survives wrap-around")
    func wrap() {
        #expect(sequenceOrder(1, 2))
        #expect(sequenceOrder(UInt32.max, 1))
        #expect(!sequenceOrder(5, 5))
    }
}
