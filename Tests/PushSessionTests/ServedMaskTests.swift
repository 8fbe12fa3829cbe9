import Testing
import PushSession
import PushWire

@Suite("Served requests")
struct ServedMaskTests {
    @Test("serves(_:) answers as served.contains(_:) for every type, through init and later changes")
    func servesMatchesSet() {
        var limits = ServiceLimits(name: "gw", served: [.push, .registry])
        for type in MessageType.allCases { #expect(limits.serves(type) == limits.served.contains(type)) }
        let shared = limits
        limits.served = [.store, .fetch, .ack]
        for type in MessageType.allCases {
            #expect(limits.serves(type) == limits.served.contains(type))
            #expect(shared.serves(type) == [.push, .registry].contains(type))
        }
    }
}
