import Testing
import PushWire
@testable import PushGateway

extension GatewayFixture {
    /// Acknowledges every PUSH the link got since the last call, as a device would ([4.14-2]).
    func acknowledgeAll(_ record: DeviceRecord, _ link: TestLink, after seen: inout Int) {
        let pushes = link.pushes
        while seen < pushes.count {
            let (correlation, push) = pushes[seen]
            seen += 1
            acknowledge(record, correlation: correlation, id: push.id)
        }
    }

    func missedCount(_ link: TestLink) -> UInt32 {
        link.messages.reduce(0) { total, message in
            if case .missed(let missed) = message { return total + missed.missedCount }
            return total
        }
    }
}

@Suite("Gateway delivery window and DELIVERY_ACK")
struct GatewayWindowTests {
    @Test("at most `deliveryWindow` pushes are in flight; the rest wait in the queue and go out one per DELIVERY_ACK")
    func windowPacesLivePushes() {
        let gateway = GatewayFixture(window: 4)
        let (record, link) = gateway.connect("phone")
        var acks: [PushAck] = []
        for id in 1...10 { acks.append(gateway.push(.device("phone"), id: UInt8(id))) }
        #expect(acks.prefix(4).allSatisfy { $0 == PushAck(written: 1, queued: 0) })
        #expect(acks.suffix(6).allSatisfy { $0 == PushAck(written: 0, queued: 1) }, "behind the window: queued, not written")
        #expect(link.pushes.map { $0.1.id } == [[1], [2], [3], [4]])
        #expect(record.inFlight.count == 4 && record.queue.count == 6)

        // One acknowledgement, one more push: the window stays full, never over.
        gateway.acknowledge(record, correlation: link.pushes[1].0, id: [2])
        #expect(link.pushes.map { $0.1.id } == [[1], [2], [3], [4], [5]])
        #expect(record.inFlight.count == 4 && record.queue.count == 5)

        var seen = 0
        var rounds = 0
        while link.pushes.count > seen || !record.queue.isEmpty {
            gateway.acknowledgeAll(record, link, after: &seen)
            #expect(record.inFlight.count <= 4)
            rounds += 1
            if rounds > 20 { break }
        }
        #expect(link.pushes.map { $0.1.id } == (1...10).map { [UInt8($0)] }, "every push once, in order")
        #expect(record.inFlight.isEmpty && record.queue.isEmpty && link.messages.isEmpty)
    }

    @Test("[4.14-5] [4.13-10] the window bounds unacknowledged pushes in bytes too, by the output cap: a device that reads and does not acknowledge is paced, not cut off, whatever the turns")
    func windowInBytes() {
        let gateway = GatewayFixture(window: 1000, windowBytes: 1024)
        let size = gateway.frameSize()
        let fits = 1024 / size
        let (record, link) = gateway.connect("phone")
        var acks: [PushAck] = []
        for id in 1...(fits + 3) {
            acks.append(gateway.push(.device("phone"), id: UInt8(id)))
            link.read()  // the device reads every push at once: the output is empty each time
        }
        #expect(acks.prefix(fits).allSatisfy { $0 == PushAck(written: 1, queued: 0) })
        #expect(acks.suffix(3).allSatisfy { $0 == PushAck(written: 0, queued: 1) }, "behind a window full in bytes: queued")
        #expect(record.inFlight.count == fits && Int(record.inFlight.byteCount) == fits * size)
        #expect(link.open && record.isOnline && gateway.logic.metrics.slowConsumersCut.value == 0)

        gateway.acknowledge(record, correlation: link.pushes[0].0, id: [1])
        #expect(link.pushes.count == fits + 1, "one acknowledgement frees one frame's bytes: one more push")
        var seen = 1
        for _ in 0..<4 { gateway.acknowledgeAll(record, link, after: &seen) }
        #expect(link.pushes.map { $0.1.id } == (1...(fits + 3)).map { [UInt8($0)] })
        #expect(record.inFlight.isEmpty && record.inFlight.byteCount == 0 && record.queue.isEmpty)
    }

    @Test("[4.15-1] [4.15-5] a connected device whose queue overflows behind its full window is told at once, with nothing acknowledged; later drops wait until it has read that MISSED")
    func missedWhileConnected() {
        let gateway = GatewayFixture(queueCapacity: 2, window: 2)
        let (record, link) = gateway.connect("phone")
        for id in 1...4 { _ = gateway.push(.device("phone"), id: UInt8(id)) }
        #expect(link.pushes.count == 2 && link.messages.isEmpty, "2 in flight, 2 queued")
        _ = gateway.push(.device("phone"), id: 5)  // drops 3
        #expect(link.messages == [.missed(Missed(missedCount: 1))])
        _ = gateway.push(.device("phone"), id: 6)  // drops 4: held behind the unread MISSED
        #expect(link.messages == [.missed(Missed(missedCount: 1))])
        #expect(record.missed == 1 && record.missedUnconfirmed == 1)

        var seen = 0
        for _ in 0..<4 { gateway.acknowledgeAll(record, link, after: &seen) }
        #expect(link.pushes.map { $0.1.id } == [[1], [2], [5], [6]])
        #expect(link.messages == [.missed(Missed(missedCount: 1)), .missed(Missed(missedCount: 1))],
                "the held count came once a push written after the first MISSED was acknowledged")
        #expect(record.missedUnconfirmed == 1, "that second MISSED has no push after it yet")
        gateway.disconnect(record, link: link)
        let (_, again) = gateway.connect("phone")
        #expect(again.messages.isEmpty && again.pushes.isEmpty, "closed with every push acknowledged: nothing told twice")
    }

    @Test("[4.15-4] a MISSED on a connection that closes with pushes unacknowledged is told again on the next one; one followed by nothing in flight is not")
    func missedToldAgain() {
        let gateway = GatewayFixture(queueCapacity: 2, window: 2)
        let (record, link) = gateway.connect("phone")
        for id in 1...5 { _ = gateway.push(.device("phone"), id: UInt8(id)) }
        #expect(link.messages == [.missed(Missed(missedCount: 1))])
        gateway.disconnect(record, link: link)  // 1 and 2 never acknowledged
        let (again, second) = gateway.connect("phone")
        // In flight 1 and 2 go back to the front of a queue of 2 holding 4 and 5: the two
        // oldest by arrival (1 and 2) drop, and the MISSED of the first link is told again.
        #expect(second.messages == [.missed(Missed(missedCount: 3))])
        var seen = 0
        for _ in 0..<4 { gateway.acknowledgeAll(again, second, after: &seen) }
        #expect(second.pushes.map { $0.1.id } == [[4], [5]])
        #expect(3 + second.pushes.count == 5, "every push delivered or counted once on the next connection")

        // Told after HELLO_OK with nothing to deliver, then closed: taken as read.
        gateway.disconnect(again, link: second)
        for id in 6...9 { _ = gateway.push(.device("phone"), id: UInt8(id)) }  // drops 6 and 7
        let (third, thirdLink) = gateway.connect("phone")
        #expect(thirdLink.messages == [.missed(Missed(missedCount: 2))])
        seen = 0
        for _ in 0..<4 { gateway.acknowledgeAll(third, thirdLink, after: &seen) }
        gateway.disconnect(third, link: thirdLink)
        let (_, fourth) = gateway.connect("phone")
        #expect(fourth.messages.isEmpty, "every push written on it was acknowledged")
    }

    @Test("[4.13-5] pushes waiting behind a full window go out higher priority first")
    func arrivalOrderBehindTheWindow() {
        let gateway = GatewayFixture(window: 1)
        let (record, link) = gateway.connect("phone")
        _ = gateway.push(.device("phone"), id: 1)
        _ = gateway.push(.device("phone"), id: 2)
        _ = gateway.push(.device("phone"), id: 3, priority: 9)
        var seen = 0
        for _ in 0..<5 { gateway.acknowledgeAll(record, link, after: &seen) }
        #expect(link.pushes.map { $0.1.id } == [[1], [3], [2]], "waiting pushes go out higher priority first [4.13-5]")
    }

    @Test("[4.13-5] a backlog flushed after (re)connect is paced by the window, higher priority first, with MISSED first")
    func backlogFlushIsPaced() {
        let gateway = GatewayFixture(queueCapacity: 50, window: 8)
        let (record, first) = gateway.connect("phone")
        gateway.disconnect(record, link: first)
        for id in 1...50 { #expect(gateway.push(.device("phone"), id: UInt8(id), priority: id == 50 ? 9 : 5) == PushAck(written: 0, queued: 1)) }
        #expect(gateway.push(.device("phone"), id: 51) == PushAck(written: 0, queued: 1), "over capacity: push 1 is dropped")
        let (again, link) = gateway.connect("phone")
        #expect(link.messages == [.missed(Missed(missedCount: 1))], "MISSED right after HELLO_OK [4.15-1]")
        #expect(link.pushes.count == 8, "only a window's worth at once")
        var seen = 0
        for _ in 0..<60 where !again.queue.isEmpty || again.inFlight.count > 0 { gateway.acknowledgeAll(again, link, after: &seen) }
        #expect(link.pushes.map { $0.1.id } == [[50]] + (2...49).map { [UInt8($0)] } + [[51]])
        #expect(again.inFlight.isEmpty && again.queue.isEmpty)
    }

    @Test("[4.14-2] a DELIVERY_ACK with the right correlation and another id is ignored and counted; so is an unknown correlation")
    func deliveryAckMustCarryTheId() {
        let gateway = GatewayFixture(window: 1)
        let (record, link) = gateway.connect("phone")
        _ = gateway.push(.device("phone"), id: 7)
        _ = gateway.push(.device("phone"), id: 8)
        let correlation = link.pushes[0].0
        gateway.acknowledge(record, correlation: correlation, id: [99])
        gateway.acknowledge(record, correlation: correlation, id: [7, 0])
        gateway.acknowledge(record, correlation: correlation &+ 1000, id: [7])
        #expect(record.inFlight.pushes.map(\.sequence) == [correlation], "still awaiting its acknowledgement")
        #expect(link.pushes.count == 1, "no slot freed by the wrong acknowledgements")
        gateway.acknowledge(record, correlation: correlation, id: [7])
        #expect(link.pushes.map { $0.1.id } == [[7], [8]])
        #expect(gateway.counter("securepush_gateway_delivery_acks_mismatched_total") == 2)
        #expect(gateway.counter("securepush_gateway_delivery_acks_unknown_total") == 1)
        #expect(gateway.counter("securepush_gateway_pushes_acknowledged_total") == 1)

        // A push not acknowledged properly comes again on the next connection.
        gateway.acknowledge(record, correlation: link.pushes[1].0, id: [7])
        gateway.disconnect(record, link: link)
        let (_, second) = gateway.connect("phone")
        #expect(second.pushes.map { $0.1.id } == [[8]])
    }

    @Test("QueuedPush.carries(id:) compares the id in the encoded frame")
    func carriesID() {
        let push = Push(target: .device("d"), id: Array(repeating: 0xAB, count: 64), alert: true, priority: 9, collapseKey: "k")
        let queued = QueuedPush(sequence: 1, frame: push.deviceFrame(correlation: 1), priority: 9, collapseKey: "k", expiresAtMs: 0)
        #expect(queued.carries(id: Array(repeating: 0xAB, count: 64)))
        #expect(!queued.carries(id: Array(repeating: 0xAB, count: 63)))
        #expect(!queued.carries(id: Array(repeating: 0xAB, count: 63) + [0xAC]))
        #expect(!queued.carries(id: []))
    }

    @Test("a link whose output is full holds pushes back until an acknowledgement; with nothing in flight it always takes one")
    func outputRoom() {
        let gateway = GatewayFixture(window: 64)
        let (record, link) = gateway.connect("phone")
        link.capBytes = 3 * gateway.frameSize()
        var acks: [PushAck] = []
        for id in 1...6 { acks.append(gateway.push(.device("phone"), id: UInt8(id))) }
        #expect(acks.map(\.written) == [1, 1, 1, 0, 0, 0] && acks.map(\.queued) == [0, 0, 0, 1, 1, 1])
        link.read()
        var seen = 0
        for _ in 0..<6 {
            gateway.acknowledgeAll(record, link, after: &seen)
            link.read()
        }
        #expect(link.pushes.map { $0.1.id } == (1...6).map { [UInt8($0)] })

        link.capBytes = gateway.frameSize()
        #expect(gateway.push(.device("phone"), id: 7) == PushAck(written: 1, queued: 0), "nothing in flight: written")
        #expect(gateway.push(.device("phone"), id: 8) == PushAck(written: 0, queued: 1), "no room, and it may wait")
        #expect(gateway.lastActions.isEmpty && link.open)
    }

    @Test("a connection that fails in the middle of a backlog flush is reported afterwards: what was written and not acknowledged, and what was behind it, all come on the next connection, once, in order")
    func failureDuringFlushLosesNothing() {
        let gateway = GatewayFixture(window: 64)
        let (record, first) = gateway.connect("phone")
        gateway.disconnect(record, link: first)
        for id in 1...40 { _ = gateway.push(.device("phone"), id: UInt8(id)) }

        // The second connection fails at its 11th write, which the logic could not foresee:
        // the logic decided all 40 writes, and hears of the close once they are carried out.
        let failing = TestLink()
        failing.failBeyond = 10
        gateway.connect("phone", link: failing)
        #expect(gateway.lastActions.count == 40)
        #expect(failing.pushes.count == 10 && !record.isOnline)
        #expect(record.queue.count == 40 && record.inFlight.isEmpty, "the 10 written and the 30 behind them wait")
        // A push while offline goes behind them.
        #expect(gateway.push(.device("phone"), id: 41) == PushAck(written: 0, queued: 1))

        let (again, link) = gateway.connect("phone")
        var seen = 0
        for _ in 0..<10 { gateway.acknowledgeAll(again, link, after: &seen) }
        #expect(link.pushes.map { $0.1.id } == (1...41).map { [UInt8($0)] })
        #expect(failing.pushes.map(\.0) == link.pushes.prefix(10).map(\.0), "redelivered with their correlation ids")
        #expect(link.messages.isEmpty, "nothing dropped, so no MISSED")
    }

    @Test("[4.13-10] a push that may not wait and passes the output cap cuts the device off: counted queued, and kept for the next connection")
    func cutByALivePush() {
        let gateway = GatewayFixture(window: 64)
        let (record, link) = gateway.connect("phone")
        link.capBytes = gateway.frameSize() - 1
        #expect(gateway.push(.device("phone"), id: 1) == PushAck(written: 0, queued: 1))
        #expect(gateway.lastActions == [.cutOff(link)], "closed as a slow consumer, nothing written")
        #expect(!record.isOnline && gateway.logic.metrics.devicesOnline.value == 0)
        #expect(gateway.push(.device("phone"), id: 2) == PushAck(written: 0, queued: 1))
        let (again, second) = gateway.connect("phone")
        var seen = 0
        for _ in 0..<4 { gateway.acknowledgeAll(again, second, after: &seen) }
        #expect(second.pushes.map { $0.1.id } == [[1], [2]])
        #expect(second.messages.isEmpty)
    }

    @Test("[4.13-10] [4.15-3] a push for connected devices only that would cut a device off is not counted, and not told as missed")
    func cutByAConnectedOnlyPush() {
        let gateway = GatewayFixture(window: 64)
        let (_, link) = gateway.connect("phone")
        link.capBytes = gateway.frameSize(ttl: 0) - 1
        #expect(gateway.push(.device("phone"), id: 1, ttl: 0) == PushAck(written: 0, queued: 0))
        #expect(gateway.lastActions == [.cutOff(link)])
        let (_, second) = gateway.connect("phone")
        #expect(second.frames.isEmpty && second.messages.isEmpty)
    }

    @Test("[4.15-1] a MISSED that would pass the output cap cuts the device off; the count waits for the next connection")
    func cutByMissed() {
        let gateway = GatewayFixture(queueCapacity: 1)
        let (record, first) = gateway.connect("phone")
        gateway.disconnect(record, link: first)
        _ = gateway.push(.device("phone"), id: 1)
        _ = gateway.push(.device("phone"), id: 2)  // drops 1
        let tight = TestLink()
        tight.capBytes = 4
        gateway.connect("phone", link: tight)
        #expect(gateway.lastActions == [.cutOff(tight)] && !record.isOnline)
        let (_, second) = gateway.connect("phone")
        #expect(second.messages == [.missed(Missed(missedCount: 1))])
        #expect(second.pushes.map { $0.1.id } == [[2]])
    }

    @Test("a live push to a connection that then fails unforeseen counts as written, and comes again on the next connection")
    func failureOfALivePush() {
        let gateway = GatewayFixture(window: 64)
        let (record, link) = gateway.connect("phone")
        link.failBeyond = 2
        #expect(gateway.push(.device("phone"), id: 1) == PushAck(written: 1, queued: 0))
        #expect(gateway.push(.device("phone"), id: 2) == PushAck(written: 1, queued: 0))
        #expect(gateway.push(.device("phone"), id: 3) == PushAck(written: 1, queued: 0), "decided before the write failed")
        #expect(!record.isOnline, "reported once the actions were carried out")
        #expect(gateway.push(.device("phone"), id: 4) == PushAck(written: 0, queued: 1))
        let (again, second) = gateway.connect("phone")
        var seen = 0
        for _ in 0..<4 { gateway.acknowledgeAll(again, second, after: &seen) }
        #expect(second.pushes.map { $0.1.id } == [[1], [2], [3], [4]])
    }

    @Test("when the queue cannot take back what was in flight, the oldest count into MISSED: delivered plus missed is every push")
    func requeueOverflowCountsMissed() {
        let gateway = GatewayFixture(queueCapacity: 10, window: 8)
        let (record, link) = gateway.connect("phone")
        for id in 1...18 { _ = gateway.push(.device("phone"), id: UInt8(id)) }
        #expect(record.inFlight.count == 8 && record.queue.count == 10)
        gateway.disconnect(record, link: link)
        #expect(record.queue.count == 10 && record.missed == 8)
        let (again, second) = gateway.connect("phone")
        var seen = 0
        for _ in 0..<10 { gateway.acknowledgeAll(again, second, after: &seen) }
        #expect(gateway.missedCount(second) == 8)
        #expect(second.pushes.map { $0.1.id } == (9...18).map { [UInt8($0)] }, "the newest 10, once each")
        #expect(gateway.missedCount(second) + UInt32(second.pushes.count) == 18)
    }

    @Test("[5.5-3] a replaced connection's unacknowledged pushes go first on the new one")
    func replacementRequeues() {
        let gateway = GatewayFixture(window: 2)
        let (record, first) = gateway.connect("phone")
        for id in 1...4 { _ = gateway.push(.device("phone"), id: UInt8(id)) }
        #expect(first.pushes.count == 2)
        let (_, second) = gateway.connect("phone")
        #expect(first.wasReplaced)
        #expect(second.pushes.map { $0.1.id } == [[1], [2]])
        var seen = 0
        for _ in 0..<3 { gateway.acknowledgeAll(record, second, after: &seen) }
        #expect(second.pushes.map { $0.1.id } == [[1], [2], [3], [4]])
    }

    @Test("[4.13-5] ttl_s 0 behind a full window waits while the device stays connected, and counts into MISSED if it leaves first")
    func connectedOnlyBehindTheWindow() {
        let gateway = GatewayFixture(window: 1)
        let (record, link) = gateway.connect("phone")
        _ = gateway.push(.device("phone"), id: 1)
        #expect(gateway.push(.device("phone"), id: 2, ttl: 0) == PushAck(written: 0, queued: 1))
        gateway.now += 3_600_000  // ttl 0 means "while connected", not "expired at once"
        var seen = 0
        gateway.acknowledgeAll(record, link, after: &seen)
        #expect(link.pushes.map { $0.1.id } == [[1], [2]] && link.messages.isEmpty)

        _ = gateway.push(.device("phone"), id: 3, ttl: 0)  // in flight, unacknowledged
        _ = gateway.push(.device("phone"), id: 4, ttl: 0)  // queued
        _ = gateway.push(.device("phone"), id: 5)          // queued, kept
        gateway.acknowledgeAll(record, link, after: &seen)  // acknowledges 2 only: 3 is written now
        gateway.disconnect(record, link: link)
        let (_, second) = gateway.connect("phone")
        #expect(second.messages == [.missed(Missed(missedCount: 2))], "3 and 4 were for that connection only")
        #expect(second.pushes.map { $0.1.id } == [[5]])
    }

    @Test("InFlightPushes: acknowledged in order or out of order, the rest keep their order")
    func inFlightOrder() {
        var inFlight = InFlightPushes()
        for sequence in UInt32(1)...100 {
            inFlight.append(QueuedPush(sequence: sequence, frame: [], priority: 5, collapseKey: nil, expiresAtMs: 0))
        }
        for sequence in UInt32(1)...40 { inFlight.remove(at: inFlight.index(of: sequence)!) }
        inFlight.remove(at: inFlight.index(of: 77)!)
        #expect(inFlight.index(of: 77) == nil && inFlight.index(of: 3) == nil)
        #expect(inFlight.pushes.map(\.sequence) == Array(41...76) + Array(78...100))
        #expect(inFlight[inFlight.index(of: 41)!].sequence == 41)
        #expect(inFlight.count == 59)
        #expect(inFlight.removeAll().map(\.sequence) == Array(41...76) + Array(78...100))
        #expect(inFlight.isEmpty && inFlight.count == 0)
    }

    @Test("DeviceQueue: returned pushes go ahead of every priority; overflow drops the oldest by arrival; collapse and expiry still hold")
    func queueOrder() {
        func push(_ sequence: UInt32, priority: UInt8 = 5, key: String? = nil, expires: Int64 = 1_000) -> QueuedPush {
            QueuedPush(sequence: sequence, frame: [], priority: priority, collapseKey: key, expiresAtMs: expires)
        }
        var queue = DeviceQueue(capacity: 5)
        #expect(queue.enqueue(push(10), nowMs: 0) == .queued)
        #expect(queue.enqueue(push(11, priority: 9), nowMs: 0) == .queued)
        #expect(queue.returnToFront([push(3, priority: 1), push(2)]) == 0)
        #expect(queue.entries.map(\.sequence) == [3, 2, 11, 10])
        #expect(queue.enqueue(push(12, priority: 10, key: "k"), nowMs: 0) == .queued)
        #expect(queue.entries.map(\.sequence) == [3, 2, 12, 11, 10], "a higher priority does not pass the returned pushes")
        #expect(queue.enqueue(push(13, key: "k"), nowMs: 0) == .collapsed)
        #expect(queue.entries.map(\.sequence) == [3, 2, 11, 10, 13])
        #expect(queue.enqueue(push(14), nowMs: 0) == .queuedDroppingOldest)
        #expect(queue.entries.map(\.sequence) == [3, 11, 10, 13, 14], "2 arrived first")
        #expect(queue.returnToFront([push(1, expires: 10)]) == 1)
        #expect(queue.entries.map(\.sequence) == [3, 11, 10, 13, 14], "1 is the oldest of all")
        #expect(queue.removeFirst().sequence == 3)
        #expect(queue.returnToFront([push(4, expires: 10)]) == 0)
        #expect(queue.dropExpired(nowMs: 10) == 1)
        #expect(queue.entries.map(\.sequence) == [11, 10, 13, 14])
        #expect(queue.enqueue(push(15, priority: 9), nowMs: 10) == .queued)
        #expect(queue.entries.map(\.sequence) == [11, 15, 10, 13, 14], "no returned pushes left: priority order again")
        while !queue.isEmpty { queue.removeFirst() }
        #expect(queue.count == 0 && queue.first == nil)
    }
}
