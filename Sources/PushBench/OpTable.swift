/// The operations in flight: a fixed table of slots, each with its start time.
///
/// An operation's token is its slot in the low 16 bits and the slot's generation in
/// the high 16 bits; it travels as the request's correlation id (and, for pushes, in
/// the notification id), so a reply finds its operation in O(1), and a stale or foreign
/// reply (a redelivered push from an earlier run) is recognised by its generation.
/// Generations start at 1, so a token is never 0, the id of one-way messages.
struct OpTable {
    let capacity: Int
    private(set) var start: [UInt64]
    private(set) var measured: [Bool]
    private var generation: [UInt16]
    private var inUse: [Bool]
    private var free: [UInt16]

    init(capacity requested: Int) {
        let capacity = min(max(requested, 1), LoadShape.maxOutstanding)
        self.capacity = capacity
        start = Array(repeating: 0, count: capacity)
        measured = Array(repeating: false, count: capacity)
        generation = Array(repeating: 0, count: capacity)
        inUse = Array(repeating: false, count: capacity)
        // Popped from the end: slot 0 first.
        free = (0..<capacity).reversed().map { UInt16($0) }
    }

    var outstanding: Int { capacity - free.count }

    /// A fresh operation, or nil when every slot is busy.
    mutating func allocate(start time: UInt64, measured isMeasured: Bool) -> (token: UInt32, slot: Int)? {
        guard let raw = free.popLast() else { return nil }
        let slot = Int(raw)
        var next = generation[slot] &+ 1
        if next == 0 { next = 1 }
        generation[slot] = next
        inUse[slot] = true
        start[slot] = time
        measured[slot] = isMeasured
        return (UInt32(next) << 16 | UInt32(raw), slot)
    }

    /// The slot of a live operation, or nil for a stale, finished or foreign token.
    func slot(of token: UInt32) -> Int? {
        let slot = Int(token & 0xFFFF)
        guard slot < capacity, inUse[slot], generation[slot] == UInt16(token >> 16) else { return nil }
        return slot
    }

    mutating func release(_ slot: Int) {
        guard inUse[slot] else { return }
        inUse[slot] = false
        free.append(UInt16(slot))
    }

    /// Forgets every operation still in flight (they were counted as lost).
    mutating func releaseAll() {
        for slot in 0..<capacity where inUse[slot] { release(slot) }
    }
}
