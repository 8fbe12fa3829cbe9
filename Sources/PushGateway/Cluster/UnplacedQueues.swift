import PushWire
/// Devices whose queue a node wrote in JetStream while it knew of no node holding them,
/// with when (wall clock, ms). A node that was cut off or paused still holds its devices,
/// but the others, having taken it for dead, forgot them: when its presence shows such a
/// device connected there, that node must be told to take the queue, as its own take when
/// the device connected may have come before the write. No I/O.
struct UnplacedQueues {
    /// Devices remembered at most; one more forgets an arbitrary one.
    static let capacity = 100_000
    /// Nodes' clocks may differ by this much: a connection stamped up to this long after a
    /// write may still have been made before it.
    static let clockSkewMs: UInt64 = 5_000

    private var writtenAtWallMs: [ExactName: UInt64] = [:]

    var isEmpty: Bool { writtenAtWallMs.isEmpty }
    var count: Int { writtenAtWallMs.count }

    mutating func wrote(_ deviceID: String, atWallMs: UInt64) {
        if writtenAtWallMs[ExactName(deviceID)] == nil, writtenAtWallMs.count >= UnplacedQueues.capacity, let any = writtenAtWallMs.keys.first {
            writtenAtWallMs[any] = nil
        }
        writtenAtWallMs[ExactName(deviceID)] = atWallMs
    }

    /// The device connected here: its own take covers what was written.
    mutating func forget(_ deviceID: String) {
        writtenAtWallMs[ExactName(deviceID)] = nil
    }

    /// Presence says `deviceID` is connected at some node since `stamp` (wall ms): whether
    /// that node must be told to take its queue. Either way the device is forgotten here.
    mutating func holderMustTake(_ deviceID: String, connectedSince stamp: UInt64) -> Bool {
        guard let written = writtenAtWallMs.removeValue(forKey: ExactName(deviceID)) else { return false }
        return stamp <= written &+ UnplacedQueues.clockSkewMs
    }
}
