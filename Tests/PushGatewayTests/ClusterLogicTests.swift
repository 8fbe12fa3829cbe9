import Testing
import PushSecurity
import PushWire
@testable import PushGateway

/// How a cluster node's routing hands a device's queue on and takes it back, without NATS.
extension GatewayFixture {
    func deliverForwarded(_ forwarded: ForwardedPush) -> (written: UInt32, queued: UInt32, away: [String]) {
        let outcome = logic.deliverForwarded(forwarded)
        lastActions = carryOut(logic)
        return outcome
    }
}

@Suite("Gateway cluster: a node's queues leave and arrive with the device")
struct ClusterLogicTests {
    static func push(_ id: UInt8, ttlMs: UInt64 = 60_000, priority: UInt8 = 5) -> ClusterPush {
        let frame = Push(target: nil, id: [id], priority: priority).deviceFrame(correlation: 0)
        return ClusterPush(deviceFrame: frame, priority: priority, collapseKey: nil, expiresAtWallMs: 1_700_000_000_000 + ttlMs)
    }

    @Test("[4.14-3] a closed connection's unacknowledged and waiting pushes leave as a record, returned ones first")
    func releaseAfterDisconnect() throws {
        let gateway = GatewayFixture(window: 1)
        let (record, link) = gateway.connect("phone")
        _ = gateway.deliverForwarded(ForwardedPush(push: Self.push(1), deviceIDs: ["phone"]))
        _ = gateway.deliverForwarded(ForwardedPush(push: Self.push(2, priority: 9), deviceIDs: ["phone"]))
        #expect(link.pushes.map { $0.1.id } == [[1]], "a window of one: push 2 waits")
        gateway.disconnect(record, link: link)
        let released = try #require(gateway.logic.release(record))
        #expect(gateway.logic.devices["phone"] == nil, "a cluster node keeps no record of a device that left")
        #expect(released.entries.map(\.returned) == [true, false])
        #expect(released.entries.map { $0.push.frameBody } == [Self.push(1).frameBody, Self.push(2, priority: 9).frameBody])
        #expect(released.entries.allSatisfy { $0.push.expiresAtWallMs > 1_700_000_000_000 }, "TTLs travel as wall-clock times")
    }

    @Test("a taken record is delivered on the device's new connection: MISSED first, then returned pushes, then by priority")
    func absorbOnArrival() {
        let gateway = GatewayFixture()
        let (record, link) = gateway.connect("phone")
        let taken = QueueRecord(user: "alice", missed: 2, entries: [
            QueueRecord.Entry(push: Self.push(1), returned: true, rank: 1),
            QueueRecord.Entry(push: Self.push(2), returned: false, rank: 2),
            QueueRecord.Entry(push: Self.push(3, priority: 9), returned: false, rank: 3),
        ])
        gateway.logic.absorb(taken, into: record)
        let actions = carryOut(gateway.logic)
        #expect(actions.first == .missed(link, Missed(missedCount: 2)), "MISSED before the pushes")
        #expect(actions.count == 4)
        #expect(link.messages.first == .missed(Missed(missedCount: 2)))
        #expect(link.pushes.map { $0.1.id } == [[1], [3], [2]])
        let correlations = link.pushes.map(\.0)
        #expect(Set(correlations).count == 3, "each push gets this node's own correlation id")
        gateway.acknowledge(record, correlation: correlations[0], id: [1])
        #expect(record.inFlight.count == 2, "DELIVERY_ACK matches an absorbed push like any other")
    }

    @Test("a record for another user is not delivered: the device was enrolled again")
    func absorbOtherUser() {
        let gateway = GatewayFixture()
        let (record, link) = gateway.connect("phone", user: "alice")
        gateway.logic.absorb(QueueRecord(user: "bob", entries: [QueueRecord.Entry(push: Self.push(1), returned: false, rank: 1)]),
                             into: record)
        #expect(gateway.logic.actions.isEmpty && link.frames.isEmpty)
    }

    @Test("[5.5-3] a later connection on another node: GOAWAY REPLACED here, and what was written comes back for the handover")
    func replacedOnAnotherNode() throws {
        let gateway = GatewayFixture()
        let (_, link) = gateway.connect("phone")
        _ = gateway.deliverForwarded(ForwardedPush(push: Self.push(1), deviceIDs: ["phone", "elsewhere"]))
        let record = try #require(gateway.logic.replacedElsewhere("phone"))
        #expect(carryOut(gateway.logic) == [.replaced(link)], "GOAWAY REPLACED")
        #expect(link.wasReplaced)
        #expect(gateway.logic.metrics.devicesOnline.value == 0)
        let released = try #require(gateway.logic.release(record))
        #expect(released.entries.count == 1 && released.entries[0].returned)
        #expect(gateway.logic.replacedElsewhere("phone") == nil)
    }

    @Test("a forwarded push for devices no longer here names them, for their queues in JetStream")
    func forwardedToDevicesThatLeft() {
        let gateway = GatewayFixture()
        gateway.connect("phone")
        let outcome = gateway.deliverForwarded(ForwardedPush(push: Self.push(1), deviceIDs: ["phone", "gone"]))
        #expect(outcome.written == 1 && outcome.queued == 0 && outcome.away == ["gone"])
    }
}
