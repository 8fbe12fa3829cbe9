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

    @Test("the home is FNV-1a of the id's UTF-8 bytes modulo the loop count (fixed values: every loop and every build agree)")
    func fnv() {
        #expect(LoopPlacement.home(of: "", count: 7) == Int(0xcbf2_9ce4_8422_2325 % UInt64(7)))
        // FNV-1a of "a" is 0xaf63dc4c8601ec8c; of "device-42" computed byte by byte below.
        #expect(LoopPlacement.home(of: "a", count: 1_000_003) == Int(UInt64(0xaf63_dc4c_8601_ec8c) % 1_000_003))
        for id in ["device-42", "ünïcödé-phone", String(repeating: "x", count: 200)] {
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in Array(id.utf8) { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
            #expect(LoopPlacement.home(of: id, count: 13) == Int(hash % 13), "\(id)")
        }
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
