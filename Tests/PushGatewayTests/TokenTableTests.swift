import Testing
@testable import PushGateway

@Suite("The table of tallies awaiting another loop's answer")
struct TokenTableTests {
    @Test("tokens are consecutive; each is taken once, in or out of order; unknown and taken ones give nil")
    func insertAndRemove() {
        var table = TokenTable<String>()
        let tokens = (0..<5).map { table.insert("v\($0)") }
        #expect(tokens == [0, 1, 2, 3, 4])
        #expect(table.remove(3) == "v3")
        #expect(table.remove(3) == nil, "taken already")
        #expect(table.remove(0) == "v0")
        #expect(table.remove(99) == nil, "never given")
        #expect(table.insert("v5") == 5, "tokens go on from the last given, whatever was taken")
        #expect([1, 2, 4, 5].map { table.remove($0) } == ["v1", "v2", "v4", "v5"])
        #expect(table.remove(0) == nil && table.remove(5) == nil)
        #expect(table.insert("v6") == 6)
    }

    @Test("thousands held and taken in a shuffled order: each value comes back under its own token")
    func manyOutOfOrder() {
        var table = TokenTable<Int>()
        var held: [UInt64: Int] = [:]
        var generator = SystemRandomNumberGenerator()
        for round in 0..<20 {
            for value in 0..<500 { held[table.insert(round * 1_000 + value)] = round * 1_000 + value }
            for token in held.keys.shuffled(using: &generator).prefix(400) {
                #expect(table.remove(token) == held.removeValue(forKey: token))
            }
        }
        for token in held.keys.shuffled() { #expect(table.remove(token) == held.removeValue(forKey: token)) }
        #expect(held.isEmpty)
    }
}
