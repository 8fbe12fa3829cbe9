import PushWire
import Testing
@testable import PushBench

/// The per-delivery shortcuts of the bench's device side give the same bytes and the same
/// times as the plain way.
struct HotPathTests {
    private func deliver(_ slot: inout FanoutSlot, _ now: () -> UInt64) -> Bool { slot.delivered(now: now) }

    /// The stack-built DELIVERY_ACK is byte for byte what the message encoder writes.
    @Test(arguments: [16, 0, 5, 64, 200])
    func deliveryAckMatchesTheEncoder(idLength: Int) throws {
        let id = (0..<idLength).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        for correlation: UInt32 in [0, 1, 0xDEAD_BEEF, .max] {
            let built = id.withUnsafeBytes { raw in
                DeliveryAckFrame.withFrame(correlation: correlation, id: raw) { Array($0) }
            }
            let expected = Message.deliveryAck(DeliveryAck(id: id)).encoded(correlation: correlation)
            #expect(built == expected)
            let header = try built.withUnsafeBytes { try FrameHeader.parse($0, maxFrame: FrameLimits.defaultMaxFrame) }
            #expect(header.type == .deliveryAck)
            #expect(header.correlation == correlation)
            #expect(header.frameLength == built.count)
        }
    }

    @Test func fanoutReadsTheClockOnlyForTimesThatCanBeReported() {
        var clock: UInt64 = 1_000
        var reads = 0
        let now = { () -> UInt64 in
            reads += 1
            clock += 10
            return clock
        }
        var slot = FanoutSlot(remaining: 4, awaitingAck: true)
        // Before the PUSH_ACK every receipt may turn out to be the last: all are timed.
        #expect(!deliver(&slot, now))
        #expect(slot.firstAt == 1_010 && slot.lastAt == 1_010)
        #expect(!deliver(&slot, now))
        #expect(slot.lastAt == 1_020 && reads == 2)
        slot.awaitingAck = false
        // After it, a receipt in the middle is only counted...
        #expect(!deliver(&slot, now))
        #expect(reads == 2 && slot.lastAt == 1_020)
        // ...and the last one is timed.
        #expect(deliver(&slot, now))
        #expect(reads == 3 && slot.lastAt == 1_030 && slot.firstAt == 1_010)
        #expect(slot.isComplete)
        // A receipt beyond the count (a duplicate) changes nothing.
        #expect(!deliver(&slot, now))
        #expect(reads == 3 && slot.remaining == 0)
    }

    @Test func fanoutCompletesOnlyOnceThePushAckIsIn() {
        var clock: UInt64 = 0
        let now = { () -> UInt64 in
            clock += 1
            return clock
        }
        var slot = FanoutSlot(remaining: 2, awaitingAck: true)
        _ = slot.delivered(now: now)
        #expect(deliver(&slot, now))
        #expect(!slot.isComplete)
        slot.awaitingAck = false
        #expect(slot.isComplete)
        #expect(slot.firstAt == 1 && slot.lastAt == 2)
    }

    /// A PUSH_ACK that reports devices not written to lowers `remaining`; the last receipt
    /// so far is then the end, and it was timed.
    @Test func fanoutEndsAtTheLatestReceiptWhenDevicesWereNotWritten() {
        var clock: UInt64 = 0
        let now = { () -> UInt64 in
            clock += 5
            return clock
        }
        var slot = FanoutSlot(remaining: 3, awaitingAck: true)
        _ = slot.delivered(now: now)
        _ = slot.delivered(now: now)
        slot.remaining -= 1  // the PUSH_ACK: one device not written
        slot.awaitingAck = false
        #expect(slot.isComplete)
        #expect(slot.firstAt == 5 && slot.lastAt == 10)
    }
}
