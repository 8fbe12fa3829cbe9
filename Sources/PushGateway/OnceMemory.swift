import PushWire

/// What a loop of the gateway remembers of the PUSHes with `once` 1 it accepted ([4.13-12]):
/// by id, the counts its share of the push was answered with, so that a repeat is written
/// and queued nowhere again and gets the same counts. Loop-confined, like `GatewayLogic`.
///
/// Where it is kept: with the part of the gateway that matches a push's target against
/// the devices whose home it is (`GatewayLogic.route`), not with the loop a provider's PUSH
/// came in on. On a gateway of several loops a repeat may enter at another loop than the
/// first; it reaches the same homes (a device target its device's home loop, a user or a
/// tag every loop), each answers its share from its own memory, and the sum is the first
/// PUSH_ACK. A share that matched no device is remembered too (as 0 and 0), so that a
/// device that connected meanwhile does not get the repeat.
///
/// On a cluster node a home is where a device is connected, so a member remembers per
/// device what it did (`DeviceOutcome`), whichever member's PUSH it was part of: see
/// `GatewayCluster.route`.
///
/// Bounded twice: an id is forgotten once `windowMs` has passed since it was remembered
/// (the spec asks for at least 300 s), and past `capacity` ids the oldest is forgotten
/// first. Both are found at the front of `order`, the ids in the order remembered, so
/// forgetting costs O(1) a push, amortized.
struct OnceMemory {
    /// What a cluster member did with a push for one device connected to it.
    enum DeviceOutcome: Equatable {
        case written
        case queued
    }

    struct Entry {
        /// The counts the share was answered with (a gateway alone or on several loops).
        var ack: PushAck
        /// On a cluster node: what became of the push for each device here it reached.
        var devices: [ExactName: DeviceOutcome]
        let rememberedAtMs: Int64
    }

    /// How long an id is remembered ([4.13-12]: at least 300 seconds).
    static let windowMs: Int64 = 300_000
    let capacity: Int
    let windowMs: Int64
    private(set) var entries: [[UInt8]: Entry] = [:]
    /// `order[head...]`: the ids of `entries`, oldest first.
    private var order: [[UInt8]] = []
    private var head = 0

    init(capacity: Int, windowMs: Int64 = OnceMemory.windowMs) {
        self.capacity = max(1, capacity)
        self.windowMs = windowMs
    }

    /// Ids remembered now.
    var count: Int { entries.count }

    /// What is remembered of `id`, if it was remembered no longer than the window ago.
    mutating func entry(_ id: [UInt8], nowMs: Int64) -> Entry? {
        forgetExpired(nowMs: nowMs)
        return entries[id]
    }

    /// Remembers the counts a share of the PUSH with `id` was answered with. `id` must not
    /// be remembered already (a repeat is answered from memory, not routed).
    mutating func remember(_ id: [UInt8], ack: PushAck, nowMs: Int64) {
        insert(id, Entry(ack: ack, devices: [:], rememberedAtMs: nowMs))
    }

    /// What a cluster member did with the push `id` for a device connected to it, if it
    /// reached that device within the window.
    mutating func outcome(of id: [UInt8], for deviceID: String, nowMs: Int64) -> DeviceOutcome? {
        entry(id, nowMs: nowMs)?.devices[ExactName(deviceID)]
    }

    /// Remembers what a cluster member did with the push `id` for one of its devices; the
    /// id's window starts when the first of them is remembered.
    mutating func remember(_ id: [UInt8], device deviceID: String, _ outcome: DeviceOutcome, nowMs: Int64) {
        forgetExpired(nowMs: nowMs)
        guard entries[id] != nil else {
            return insert(id, Entry(ack: PushAck(written: 0, queued: 0), devices: [ExactName(deviceID): outcome], rememberedAtMs: nowMs))
        }
        entries[id]?.devices[ExactName(deviceID)] = outcome
    }

    /// Forgets the ids remembered more than the window ago.
    mutating func forgetExpired(nowMs: Int64) {
        while head < order.count {
            if let entry = entries[order[head]], nowMs - entry.rememberedAtMs <= windowMs { break }
            entries[order[head]] = nil
            head += 1
        }
        compact()
    }

    private mutating func insert(_ id: [UInt8], _ entry: Entry) {
        entries[id] = entry
        order.append(id)
        // Over the bound: the oldest go first, whatever is left of their window.
        while entries.count > capacity, head < order.count {
            entries[order[head]] = nil
            head += 1
        }
        compact()
    }

    private mutating func compact() {
        if head == order.count {
            guard head > 0 else { return }
            order.removeAll(keepingCapacity: order.capacity <= 1_024)
            head = 0
        } else if head >= 1_024, head * 2 >= order.count {
            order.removeSubrange(0..<head)
            head = 0
        }
    }
}
