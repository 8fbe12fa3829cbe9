import Dispatch
@testable import PushService
import PushSession
import Synchronization
import Testing

/// The caps one process shares across its loops, from several threads at once.
@Suite("AdmissionGate")
struct AdmissionGateTests {
    @Test("threads racing for the last connection slots never admit past maxConnections")
    func racingReservationsStayUnderTheCap() {
        var limits = ServiceLimits(name: "test", served: [])
        limits.maxConnections = 50
        let gate = AdmissionGate(limits: limits)
        let granted = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<100 where gate.reserveSlot() == nil {
                granted.add(1, ordering: .relaxed)
            }
        }
        #expect(granted.load(ordering: .relaxed) == 50)
        gate.cancelReservation()
        #expect(gate.reserveSlot() == nil, "a cancelled reservation frees its slot")
        #expect(gate.reserveSlot() == .connectionLimit)
    }
}
