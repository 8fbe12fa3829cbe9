import Testing
import PushSecurity
import PushWire
@testable import PushGateway

/// PUSH's `user` and `once` on a cluster node, without NATS: forwarded pushes, queue
/// records in JetStream, and what a node remembers as it takes a device's queue.
@Suite("Gateway cluster: PUSH's user and once")
struct ClusterOnceTests {
    static let wallNow: UInt64 = 1_700_000_000_000
    static let alice = QueueOwner(user: "alice", enrolment: 0)

    static func push(_ id: UInt8, user: String? = nil, once: Bool = false, priority: UInt8 = 5,
                     collapse: String? = nil) -> ClusterPush {
        let frame = Push(target: nil, id: [id], priority: priority, collapseKey: collapse).deviceFrame(correlation: 0)
        return ClusterPush(deviceFrame: frame, priority: priority, collapseKey: collapse, expiresAtWallMs: wallNow + 60_000,
                           user: user, once: once)
    }

    static func ids(_ link: TestLink) -> [[UInt8]] { link.pushes.map { $0.1.id } }

    @Test("a push's id is read from its frame body, whatever fields come first")
    func idFromFrameBody() {
        #expect(Self.push(42, collapse: "k").id.map(Array.init) == [42])
        let long = Array(repeating: UInt8(7), count: 64)
        let frame = Push(target: nil, id: long, alert: true).deviceFrame(correlation: 3)
        #expect(ClusterPush(deviceFrame: frame, priority: 5, collapseKey: nil, expiresAtWallMs: 1).id.map(Array.init) == long)
        let reordered = ClusterPush(frameBody: [0x32, 0x01, 0x01, 0x15, 0x02, 0xAB, 0xCD], priority: 5, collapseKey: nil, expiresAtWallMs: 1)
        #expect(reordered.id.map(Array.init) == [0xAB, 0xCD])
        #expect(ClusterPush(frameBody: [0x32, 0x01, 0x01], priority: 5, collapseKey: nil, expiresAtWallMs: 1).id == nil)
        #expect(ClusterPush(frameBody: [0x15, 0x05, 0x01], priority: 5, collapseKey: nil, expiresAtWallMs: 1).id == nil, "cut short")
    }

    @Test("[4.13-12] a queue record takes a push with once only once; once 0, another id or another owner are new")
    func recordTakesOnceOnlyOnce() {
        let now = Self.wallNow
        let record = QueueRecord(user: "alice").appending(Self.push(1, once: true), for: Self.alice, capacity: 10, nowWallMs: now).0
        let (again, outcome) = record.appending(Self.push(1, once: true), for: Self.alice, capacity: 10, nowWallMs: now)
        #expect(outcome == nil && again == record, "a repeat leaves the record as it is")
        #expect(again.entries.count == 1 && again.entries[0].push.once)
        #expect(record.appending(Self.push(1), for: Self.alice, capacity: 10, nowWallMs: now).0.entries.count == 2, "once 0 is new")
        #expect(record.appending(Self.push(2, once: true), for: Self.alice, capacity: 10, nowWallMs: now).0.entries.count == 2)
        let plain = QueueRecord(user: "alice").appending(Self.push(3), for: Self.alice, capacity: 10, nowWallMs: now).0
        #expect(plain.appending(Self.push(3, once: true), for: Self.alice, capacity: 10, nowWallMs: now).1 == .queued,
                "a push without once held already does not make a once one a repeat")
        let bobs = record.appending(Self.push(1, once: true), for: QueueOwner(user: "bob", enrolment: 0), capacity: 10, nowWallMs: now)
        #expect(bobs.1 == .queued && bobs.0.user == "bob" && bobs.0.entries.count == 1, "enrolled again for bob: a new queue")
    }

    @Test("[4.13-12] merging a handed-over queue keeps the first of two entries of a push with once")
    func mergeKeepsOneCopy() {
        let now = Self.wallNow
        let queued = QueueRecord(user: "alice").appending(Self.push(1, once: true), for: Self.alice, capacity: 10, nowWallMs: now).0
        let handed = QueueRecord(user: "alice", entries: [
            QueueRecord.Entry(push: Self.push(1, once: true), returned: true, rank: 1),
            QueueRecord.Entry(push: Self.push(2), returned: false, rank: 2),
        ])
        let merged = queued.merging(older: handed, capacity: 10, nowWallMs: now)
        #expect(merged.entries.map { $0.push.id.map(Array.init) } == [[1], [2]])
        #expect(merged.entries[0].returned, "the returned copy, which goes first")
    }

    @Test("[4.13-12] a forwarded repeat is answered from what this node delivered, and written nowhere again")
    func forwardedRepeat() {
        let gateway = GatewayFixture(window: 1)
        let (phoneRecord, phone) = gateway.connect("phone")
        let (_, tablet) = gateway.connect("tablet")
        let first = gateway.deliverForwarded(ForwardedPush(push: Self.push(9), deviceIDs: ["phone"]))
        #expect(first.written == 1)
        let once = ForwardedPush(push: Self.push(1, once: true), deviceIDs: ["phone", "tablet", "gone"])
        let delivered = gateway.deliverForwarded(once)
        #expect(delivered.written == 1 && delivered.queued == 1 && delivered.away == ["gone"], "phone's window is full")
        let repeated = gateway.deliverForwarded(once)
        #expect(repeated.written == 1 && repeated.queued == 1 && repeated.away == ["gone"], "the first counts; away devices go to JetStream")
        #expect(phoneRecord.queue.count == 1 && Self.ids(tablet) == [[1]])
        gateway.acknowledge(phoneRecord, correlation: phone.pushes[0].0, id: [9])
        #expect(Self.ids(phone) == [[9], [1]])
        // In chunks: the devices a part names that this node did not reach yet are new.
        let (_, laptop) = gateway.connect("laptop")
        let chunk = gateway.deliverForwarded(ForwardedPush(push: Self.push(1, once: true), deviceIDs: ["laptop", "tablet"]))
        #expect(chunk.written == 2 && chunk.queued == 0)
        #expect(Self.ids(laptop) == [[1]] && Self.ids(tablet) == [[1]])
        #expect(gateway.counter("securepush_gateway_pushes_repeated_total") == 2)
        #expect(gateway.counter("securepush_gateway_once_ids_remembered") == 1)
    }

    @Test("[4.13-11] a forwarded push with user reaches only the named devices connected here under that user")
    func forwardedUser() {
        let gateway = GatewayFixture()
        let (_, phone) = gateway.connect("phone", user: "alice")
        let (_, shared) = gateway.connect("shared", user: "bob")
        let delivered = gateway.deliverForwarded(ForwardedPush(push: Self.push(1, user: "alice"), deviceIDs: ["phone", "shared", "gone"]))
        #expect(delivered.written == 1 && delivered.queued == 0 && delivered.away == ["gone"])
        #expect(Self.ids(phone) == [[1]] && shared.frames.isEmpty)
    }

    @Test("[4.13-12] a queue taken from JetStream: its pushes with once count as queued here, and a repeat is not delivered again")
    func absorbedOncePushes() {
        let gateway = GatewayFixture()
        let (record, link) = gateway.connect("phone")
        gateway.logic.absorb(QueueRecord(user: "alice", entries: [
            QueueRecord.Entry(push: Self.push(1, once: true), returned: false, rank: 1),
            QueueRecord.Entry(push: Self.push(2), returned: false, rank: 2),
        ]), into: record)
        _ = carryOut(gateway.logic)
        #expect(Self.ids(link) == [[1], [2]])
        let repeated = gateway.deliverForwarded(ForwardedPush(push: Self.push(1, once: true), deviceIDs: ["phone"]))
        #expect(repeated.written == 0 && repeated.queued == 1, "queued, as the first was")
        let plain = gateway.deliverForwarded(ForwardedPush(push: Self.push(2), deviceIDs: ["phone"]))
        #expect(plain.written == 1, "once 0 is new")
        #expect(Self.ids(link) == [[1], [2], [2]])
    }

    @Test("[4.13-12] a device's queue leaves the node with the once flags of its pushes")
    func releaseKeepsOnce() throws {
        let gateway = GatewayFixture(window: 1)
        let (record, link) = gateway.connect("phone")
        _ = gateway.deliverForwarded(ForwardedPush(push: Self.push(1, once: true), deviceIDs: ["phone"]))
        _ = gateway.deliverForwarded(ForwardedPush(push: Self.push(2), deviceIDs: ["phone"]))
        gateway.disconnect(record, link: link)
        let released = try #require(gateway.logic.release(record))
        #expect(released.entries.map(\.push.once) == [true, false])
        #expect(released.entries.allSatisfy { $0.push.user == nil })
        // A repeat routed to the device's record in JetStream is not queued beside it.
        let (again, outcome) = released.appending(Self.push(1, once: true).queued, for: Self.alice, capacity: 10,
                                                 nowWallMs: Self.wallNow)
        #expect(outcome == nil && again.entries.count == 2)
    }
}
