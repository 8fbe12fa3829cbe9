import PushWire
import Synchronization

/// Every stored payload ID's row sequence, in memory (see `SQLiteStoreReads`), shared by
/// the loops of one store: a STORE committed for one loop is readable on all of them.
/// Any thread; one short lock per lookup.
///
/// Whether a payload is sealed (7.6) is kept here too, in the top bit of its entry
/// (sequences are positive 63-bit numbers): FETCH needs it, and `payloads.sealed`, the
/// table's last column, costs every FETCH's row read about a thousand instructions more
/// (SQLite walks the record header up to it).
public final class PayloadSequences: Sendable {
    private let map: Mutex<[PayloadID: UInt64]>
    private static let sealedBit: UInt64 = 1 << 63

    /// Every stored ID, read at start: without them every stored payload would look unknown.
    init(reader: PayloadReader) throws {
        let all = try reader.allIDs()
        var map: [PayloadID: UInt64] = [:]
        map.reserveCapacity(all.count)
        for (id, sequence) in all { map[id] = sequence }
        for id in try reader.sealedIDs() { map[id]? |= PayloadSequences.sealedBit }
        self.map = Mutex(map)
    }

    subscript(id: PayloadID) -> UInt64? { map.withLock { $0[id] }.map { $0 & ~PayloadSequences.sealedBit } }

    /// The sequence of the payload with this ID, and whether it is sealed.
    func entry(_ id: PayloadID) -> (sequence: UInt64, sealed: Bool)? {
        map.withLock { $0[id] }.map { ($0 & ~PayloadSequences.sealedBit, $0 & PayloadSequences.sealedBit != 0) }
    }

    func set(_ id: PayloadID, _ sequence: UInt64?, sealed: Bool = false) {
        map.withLock { $0[id] = sequence.map { sealed ? $0 | PayloadSequences.sealedBit : $0 } }
    }

    var count: Int { map.withLock { $0.count } }
}
