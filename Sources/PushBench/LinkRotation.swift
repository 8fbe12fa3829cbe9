/// Round-robin over links, skipping those without room.
struct LinkRotation {
    private var next = 0

    /// The next link (by index in `links`) that can take another request.
    mutating func pick(_ links: [BenchLink]) -> Int? {
        for _ in 0..<links.count {
            let index = next
            next = next + 1 == links.count ? 0 : next + 1
            if links[index].hasRoom { return index }
        }
        return nil
    }
}
