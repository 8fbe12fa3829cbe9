import Testing
import PushSecurity
import PushWire
@testable import PushGateway

/// A device link that records what the gateway wrote.
final class RecordingLink: DeviceLink {
    var frames: [[UInt8]] = []
    var messages: [Message] = []
    var open = true
    var wasReplaced = false
    var wasRevoked = false
    /// Frames the link's output holds before it is full; nil for no limit. `read()` empties it.
    var outputFrames: Int?
    /// Frames in the output the device has not read.
    private(set) var unread = 0
    /// Like a real connection cut off for its output: the write that would make the
    /// output hold more than this many frames closes the link, runs `onCut` (the server's
    /// disconnect) before it returns, and is lost.
    var cutBeyond: Int?
    var onCut: (() -> Void)?

    func write(_ frame: [UInt8], mayWait: Bool) -> LinkWrite {
        guard open else { return .closed }
        if mayWait, let outputFrames, unread >= outputFrames { return .full }
        if let cutBeyond, unread >= cutBeyond {
            open = false
            onCut?()
            return .closed
        }
        frames.append(frame)
        unread += 1
        return .written
    }

    /// The device read everything written so far.
    func read() { unread = 0 }

    func send(_ message: Message) -> Bool {
        guard open else { return false }
        messages.append(message)
        return true
    }

    func replaced() {
        wasReplaced = true
        open = false
    }

    func revoked() {
        wasRevoked = true
        open = false
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

final class GatewayFixture {
    let serverKey = SecretKey(bytes: Array(repeating: 3, count: 32))!
    var now: Int64 = 1_000_000
    let logic: GatewayLogic
    let metrics = GatewayMetrics()

    init(queueCapacity: Int = 100, window: Int = 64) {
        var settings = GatewaySettings()
        settings.queueCapacity = queueCapacity
        settings.deliveryWindow = window
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

    @discardableResult
    func connect(_ device: String, user: String = "alice", tags: [String] = []) -> (DeviceRecord, RecordingLink) {
        let link = RecordingLink()
        let record = logic.connect(registration(device, user: user, tags: tags), link: link)
        logic.deliverBacklog(record)
        return (record, link)
    }

    func push(_ target: PushTarget, id: UInt8, ttl: UInt32 = 60, collapse: String? = nil, priority: UInt8 = 5) -> PushAck {
        logic.push(Push(target: target, id: [id], priority: priority, collapseKey: collapse, ttlSeconds: ttl))
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
        first.open = false
        gateway.logic.disconnect(record, link: first)
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
        gateway.logic.deliveryAcknowledged(record, correlation: first.pushes[0].0, id: [1])
        gateway.logic.disconnect(record, link: first)
        let (_, second) = gateway.connect("phone")
        #expect(second.pushes.map { $0.1.id } == [[2]])
        #expect(second.pushes[0].0 == first.pushes[1].0, "the same correlation id, so the ACK still matches")
    }

    @Test("[5.5-3] a second connection with the same device id replaces the first")
    func replacement() {
        let gateway = GatewayFixture()
        let (_, first) = gateway.connect("phone")
        let (_, second) = gateway.connect("phone")
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

    @Test("a link that was cut off gets the push queued instead")
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
