import PushClock
import Testing
import PushWire
@testable import PushGateway

extension GatewayFixture {
    /// The host's sweep reaching a device `afterMs` from now, on the clock pushes are timed by.
    func sweep(_ record: DeviceRecord, at startNs: UInt64, afterMs: UInt64) {
        logic.checkOutputStall(record, nowNs: startNs + afterMs * 1_000_000)
        lastActions = carryOut(logic)
    }
}

/// Issue 37, defect 7: a device that stops reading is closed with SLOW_CONSUMER after the
/// stall limit ([5.5-7]), one that reads and does not acknowledge never; a device that reads
/// nothing gets one MISSED frame, however many pushes are dropped for it ([4.15-5]).
@Suite("Gateway stall rule and one unread MISSED")
struct GatewayStallTests {
    @Test("[5.5-7] [4.14-7] pushes in flight whose bytes the device's side takes none of for the stall limit close it as a slow consumer, never before; its pushes go back to the queue")
    func stoppedReaderIsClosed() {
        let gateway = GatewayFixture(outputStallMs: 10_000)
        let (record, link) = gateway.connect("phone")
        let start = Clocks.monotonicNanoseconds()
        for id in 1...3 { #expect(gateway.push(.device("phone"), id: UInt8(id)) == PushAck(written: 1, queued: 0)) }
        gateway.sweep(record, at: start, afterMs: 100)
        #expect(gateway.lastActions.isEmpty && gateway.logic.stalls.isEmpty, "pushes just written: the link is not even asked")
        gateway.sweep(record, at: start, afterMs: 4_000)
        #expect(gateway.lastActions.isEmpty && gateway.logic.stalls.isEmpty, "not asked before half the limit")
        gateway.sweep(record, at: start, afterMs: 6_000)  // the first look that sees the stall
        #expect(gateway.lastActions.isEmpty && gateway.logic.stalls.count == 1)
        gateway.sweep(record, at: start, afterMs: 15_999)
        #expect(gateway.lastActions.isEmpty && record.isOnline, "not before the limit has passed since the stall was seen")
        gateway.sweep(record, at: start, afterMs: 16_000)
        #expect(gateway.lastActions == [.stalled(link)] && link.wasStalled)
        #expect(!record.isOnline && gateway.logic.metrics.devicesOnline.value == 0 && gateway.logic.stalls.isEmpty)
        #expect(record.queue.count == 3 && record.inFlight.isEmpty, "the unacknowledged pushes wait for the next connection")
        let (_, again) = gateway.connect("phone")
        #expect(again.pushes.map { $0.1.id } == [[1], [2], [3]] && again.messages.isEmpty)
    }

    @Test("[5.5-7] [4.14-5] a device that reads and never acknowledges is paced by its window and never closed, however long")
    func readerThatDoesNotAcknowledgeStays() {
        let gateway = GatewayFixture(queueCapacity: 10, window: 4, outputStallMs: 1_000)
        let (record, link) = gateway.connect("phone")
        let start = Clocks.monotonicNanoseconds()
        for id in 1...50 {
            _ = gateway.push(.device("phone"), id: UInt8(id))
            link.read()
        }
        #expect(record.inFlight.count == 4 && link.messages.count == 1, "window full; one MISSED for the overflow")
        for second in 1...120 { gateway.sweep(record, at: start, afterMs: UInt64(second) * 1_000) }
        #expect(record.isOnline && !link.wasStalled && gateway.logic.stalls.isEmpty)
    }

    @Test("[5.5-7] a device whose side takes some bytes within each limit restarts the time and stays; one with nothing unanswered is never asked")
    func progressRestartsTheTime() {
        let gateway = GatewayFixture(window: 1_000, outputStallMs: 1_000)
        let (record, link) = gateway.connect("phone")
        let start = Clocks.monotonicNanoseconds()
        _ = gateway.push(.device("phone"), id: 1)
        for step in 1...20 {
            gateway.sweep(record, at: start, afterMs: UInt64(step) * 900)
            link.read()  // takes what it has, then gets one more push it has not taken yet
            _ = gateway.push(.device("phone"), id: UInt8(step + 1))
        }
        #expect(record.isOnline && !link.wasStalled)

        // Everything acknowledged: output unread (replies, say) is no stall of the gateway's frames.
        var seen = 0
        gateway.acknowledgeAll(record, link, after: &seen)
        #expect(record.inFlight.isEmpty)
        for second in 30...60 { gateway.sweep(record, at: start, afterMs: UInt64(second) * 1_000) }
        #expect(record.isOnline && gateway.logic.stalls.isEmpty)
    }

    @Test("[5.5-7] a MISSED the device may not have read counts as unanswered: with nothing in flight, its bytes untaken for the limit close the device")
    func unreadMissedAloneStalls() {
        let gateway = GatewayFixture(queueCapacity: 1, outputStallMs: 1_000)
        let (record, first) = gateway.connect("phone")
        gateway.disconnect(record, link: first)
        _ = gateway.push(.device("phone"), id: 1, ttl: 1)
        gateway.now += 2_000  // expires: MISSED 1 after the next HELLO_OK, nothing to deliver
        let (_, link) = gateway.connect("phone")
        #expect(link.messages == [.missed(Missed(missedCount: 1))] && record.inFlight.isEmpty && record.missedUnconfirmed == 1)
        let start = Clocks.monotonicNanoseconds()
        gateway.sweep(record, at: start, afterMs: 600)
        gateway.sweep(record, at: start, afterMs: 1_599)
        #expect(gateway.lastActions.isEmpty)
        gateway.sweep(record, at: start, afterMs: 1_600)
        #expect(gateway.lastActions == [.stalled(link)])
        let (_, again) = gateway.connect("phone")
        #expect(again.messages.isEmpty, "closed with nothing in flight: the MISSED counts as told [4.15-4]")
    }

    @Test("[5.5-7] outputStallMs 0 turns the rule off")
    func ruleOff() {
        let gateway = GatewayFixture(outputStallMs: 0)
        let (record, link) = gateway.connect("phone")
        let start = Clocks.monotonicNanoseconds()
        _ = gateway.push(.device("phone"), id: 1)
        for second in 1...100 { gateway.sweep(record, at: start, afterMs: UInt64(second) * 1_000) }
        #expect(record.isOnline && !link.wasStalled)
    }

    @Test("[4.15-5] [4.15-1] 10,000 pushes to a device that reads nothing, queue 10, window 4: one MISSED frame, not one per push dropped; the rest of the count comes with the acknowledgement of a push written after it")
    func oneUnreadMissed() {
        let gateway = GatewayFixture(queueCapacity: 10, window: 4)
        let (record, link) = gateway.connect("phone")
        for index in 0..<10_000 { _ = gateway.push(.device("phone"), id: UInt8(truncatingIfNeeded: index)) }
        print("figures: 10,000 pushes, queue 10, window 4, a device that reads nothing: \(link.pushes.count) PUSH + \(link.messages.count) MISSED frames written, \(link.writes) writes")
        #expect(link.pushes.count == 4)
        #expect(link.messages == [.missed(Missed(missedCount: 1))], "the first drop is told at once, the rest wait for it to be read")
        #expect(record.missed == 10_000 - 4 - 10 - 1 && record.missedUnconfirmed == 1)

        // Acknowledging the pushes written before the MISSED does not show it was read ...
        var seen = 0
        gateway.acknowledgeAll(record, link, after: &seen)
        #expect(link.messages.count == 1 && link.pushes.count == 8, "the queued pushes go out, the count still waits")
        // ... acknowledging one written after it does: the count comes at once, in one frame.
        gateway.acknowledge(record, correlation: link.pushes[4].0, id: link.pushes[4].1.id)
        #expect(link.messages == [.missed(Missed(missedCount: 1)), .missed(Missed(missedCount: 9_985))])
        for _ in 0..<5 { gateway.acknowledgeAll(record, link, after: &seen) }
        #expect(link.pushes.count + Int(gateway.missedCount(link)) == 10_000, "every push delivered or counted, once")
        #expect(record.missed == 0 && record.missedUnconfirmed == 0 && record.queue.isEmpty && record.inFlight.isEmpty)
    }

    @Test("[4.15-5] [4.15-4] the count held behind an unread MISSED, and the MISSED itself, are told on the next connection if this one closes with pushes unacknowledged")
    func heldCountSurvivesTheClose() {
        let gateway = GatewayFixture(queueCapacity: 2, window: 2)
        let (record, link) = gateway.connect("phone")
        for id in 1...10 { _ = gateway.push(.device("phone"), id: UInt8(id)) }  // 2 in flight, 2 queued, 6 dropped
        #expect(link.messages == [.missed(Missed(missedCount: 1))] && record.missed == 5)
        gateway.disconnect(record, link: link)
        // In flight 1 and 2 go back ahead of 9 and 10 in a queue of 2: 1 and 2 drop too.
        let (again, second) = gateway.connect("phone")
        #expect(second.messages == [.missed(Missed(missedCount: 8))], "1 told but maybe unread + 5 held + 2 dropped at the close")
        var seen = 0
        for _ in 0..<3 { gateway.acknowledgeAll(again, second, after: &seen) }
        #expect(second.pushes.map { $0.1.id } == [[9], [10]])
    }
}
