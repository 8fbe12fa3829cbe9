import Testing
import PushSecurity
import PushWire
@testable import PushGateway

@Suite("Home loops of devices")
struct LoopPlacementTests {
    let maker = RegistrationMaker()

    @Test("every id has one home, the same on every loop, and ids spread evenly")
    func spread() {
        #expect(LoopPlacement.home(of: "phone", count: 1) == 0)
        var perLoop = [Int](repeating: 0, count: 4)
        for index in 0..<8_000 {
            let id = "device-\(index)"
            let home = LoopPlacement.home(of: id, count: 4)
            perLoop[home] += 1
            let views = (0..<4).map { LoopPlacement(index: $0, count: 4) }
            #expect(views.filter { $0.isHome(of: id) }.count == 1)
        }
        for count in perLoop { #expect((1_800...2_200).contains(count), "\(perLoop)") }
    }

    @Test("a loop's registry keeps only the devices whose home it is; users and tags match those")
    func registryShare() {
        let ids = (0..<40).map { "phone-\($0)" }
        var registries = (0..<3).map { index -> DeviceRegistry in
            var registry = DeviceRegistry(serverKey: maker.serverKey)
            registry.placement = LoopPlacement(index: index, count: 3)
            return registry
        }
        let entries = ids.map { enrolled(maker.credential($0, user: "bob", tags: ["news"])) }
        for index in registries.indices {
            let update = registries[index].apply(page(entries, cursor: 40), nowMs: maker.nowMs)
            #expect(update.becameLoaded)
        }
        var seen: Set<String> = []
        for (index, registry) in registries.enumerated() {
            var matched: Set<String> = []
            registry.forEachDevice(matching: .user("bob"), nowMs: maker.nowMs) { matched.insert($0.deviceID) }
            #expect(matched == Set(ids.filter { LoopPlacement.home(of: $0, count: 3) == index }))
            #expect(registry.enrolledCount == matched.count)
            #expect(seen.isDisjoint(with: matched))
            seen.formUnion(matched)
        }
        #expect(seen == Set(ids), "every device on exactly one loop")
    }
}
