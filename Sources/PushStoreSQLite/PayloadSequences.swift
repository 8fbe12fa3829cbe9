import PushWire
import Synchronization

/// Every stored payload ID's row sequence, in memory (see `SQLiteStoreReads`), shared by
/// the loops of one store: a STORE committed for one loop is readable on all of them.
/// Any thread; one short lock per lookup.
public final class PayloadSequences: Sendable {
    private let map: Mutex<[PayloadID: UInt64]>

    /// Every stored ID, read at start: without them every stored payload would look unknown.
    init(reader: PayloadReader) throws {
        let all = try reader.allIDs()
        var map: [PayloadID: UInt64] = [:]
        map.reserveCapacity(all.count)
        for (id, sequence) in all { map[id] = sequence }
        self.map = Mutex(map)
    }

    subscript(id: PayloadID) -> UInt64? { map.withLock { $0[id] } }

    func set(_ id: PayloadID, _ sequence: UInt64?) { map.withLock { $0[id] = sequence } }

    var count: Int { map.withLock { $0.count } }
}
