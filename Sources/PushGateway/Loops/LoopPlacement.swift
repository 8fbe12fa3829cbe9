/// Which of a gateway's loops a device lives on.
///
/// A gateway with several loop threads gives every device one home loop, chosen from its
/// id: its connection, its queue, its registry entry and its in-flight pushes all live
/// there, so no device state is ever shared between threads. A connection accepted on
/// another loop moves home after its HELLO; a PUSH for a device goes to its home loop.
public struct LoopPlacement: Sendable, Equatable {
    /// This loop's index, 0 ..< count.
    public let index: Int
    public let count: Int

    public init(index: Int, count: Int) {
        precondition(count >= 1 && (0..<count).contains(index), "a loop index within the count")
        self.index = index
        self.count = count
    }

    /// The home loop of a device id: FNV-1a over its UTF-8 bytes, so every loop (and every
    /// run) agrees without a table.
    public static func home(of deviceID: String, count: Int) -> Int {
        guard count > 1 else { return 0 }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        // Over the contiguous bytes: iterating `utf8` costs about 30 instructions a byte,
        // and this runs for every PUSH on a gateway of several loops.
        var id = deviceID
        id.withUTF8 { bytes in
            for byte in bytes {
                hash ^= UInt64(byte)
                hash &*= 0x0000_0100_0000_01b3
            }
        }
        return Int(hash % UInt64(count))
    }

    public func home(of deviceID: String) -> Int { LoopPlacement.home(of: deviceID, count: count) }

    public func isHome(of deviceID: String) -> Bool { home(of: deviceID) == index }
}
