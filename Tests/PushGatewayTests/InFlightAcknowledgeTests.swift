import Testing
import PushWire
@testable import PushGateway

@Suite("InFlightPushes.acknowledge")
struct InFlightAcknowledgeTests {
    private func queued(_ sequence: UInt32, id: [UInt8], writtenAtNs: UInt64 = 0) -> QueuedPush {
        let push = Push(target: nil, id: id)
        return QueuedPush(sequence: sequence, frame: push.deviceFrame(correlation: sequence), priority: 5, collapseKey: nil,
                          expiresAtMs: 0, writtenAtNs: writtenAtNs)
    }

    @Test("an ack names a push by correlation and must carry its id; a wrong id leaves it in flight ([4.14-2])")
    func matchesCorrelationAndID() {
        var inFlight = InFlightPushes()
        inFlight.append(queued(7, id: [1, 2, 3], writtenAtNs: 70))
        let wrongID: [UInt8] = [1, 2, 4]
        let rightID: [UInt8] = [1, 2, 3]
        #expect(rightID.withUnsafeBytes { inFlight.acknowledge(8, id: $0) } == .unknown)
        #expect(wrongID.withUnsafeBytes { inFlight.acknowledge(7, id: $0) } == .mismatched)
        #expect(inFlight.count == 1)
        #expect(rightID.withUnsafeBytes { inFlight.acknowledge(7, id: $0) } == .acknowledged(writtenAtNs: 70))
        #expect(inFlight.isEmpty)
        #expect(rightID.withUnsafeBytes { inFlight.acknowledge(7, id: $0) } == .unknown, "acknowledged once only")
    }

    @Test("the last push written, the first, or one in the middle: the rest keep their order")
    func removalKeepsOrder() {
        var inFlight = InFlightPushes()
        for sequence in UInt32(1)...6 { inFlight.append(queued(sequence, id: [UInt8(sequence)])) }
        for sequence: UInt32 in [6, 1, 3] {
            let id = [UInt8(sequence)]
            #expect(id.withUnsafeBytes { inFlight.acknowledge(sequence, id: $0) } == .acknowledged(writtenAtNs: 0))
        }
        #expect(inFlight.pushes.map(\.sequence) == [2, 4, 5])
        inFlight.append(queued(9, id: [9]))
        #expect(inFlight.pushes.map(\.sequence) == [2, 4, 5, 9])
        for sequence: UInt32 in [9, 5, 4, 2] {
            let id = [UInt8(sequence)]
            #expect(id.withUnsafeBytes { inFlight.acknowledge(sequence, id: $0) } == .acknowledged(writtenAtNs: 0))
        }
        #expect(inFlight.isEmpty && inFlight.count == 0)
        inFlight.append(queued(10, id: [10]))
        #expect(inFlight.pushes.map(\.sequence) == [10])
    }
}
