/// A record changes under the rules of a device's queue on one node ([4.13-5], [4.13-9],
/// [4.15-3]): `DeviceQueue` applies them, with wall-clock milliseconds for expiry (nodes
/// share no monotonic clock) and each entry's rank as its arrival order.
extension QueueRecord {
    /// The record with `push` added: expired pushes dropped and counted as missed, a push
    /// with the same collapse key replaced, the oldest dropped (and counted) when full.
    /// A record of another owner is emptied first: its device was enrolled again.
    func appending(_ push: ClusterPush, for owner: QueueOwner, capacity: Int, nowWallMs: UInt64) -> (QueueRecord, DeviceQueue.Outcome) {
        let base = self.owner == owner || isUnowned ? self : QueueRecord(owner: owner)
        var outcome = DeviceQueue.Outcome.queued
        let record = QueueRecord.build(owner: owner, missed: base.missed, returned: base.returnedEntries,
                                       arrived: base.arrivedEntries + [Entry(push: push, returned: false, rank: 0)],
                                       capacity: capacity, nowWallMs: nowWallMs) { outcome = $0 }
        return (record, outcome)
    }

    /// `older` (what a node hands over when its connection of the device ends) merged
    /// ahead of this record's entries: its returned pushes first, then everything by
    /// arrival, older's before this record's.
    func merging(older: QueueRecord, capacity: Int, nowWallMs: UInt64) -> QueueRecord {
        let base = owner == older.owner || isUnowned ? self : QueueRecord(owner: older.owner)
        return QueueRecord.build(owner: older.owner, missed: base.missed &+ older.missed,
                                 returned: older.returnedEntries + base.returnedEntries,
                                 arrived: older.arrivedEntries + base.arrivedEntries,
                                 capacity: capacity, nowWallMs: nowWallMs) { _ in }
    }

    /// The record with expired pushes dropped (counted as missed).
    func expiring(nowWallMs: UInt64, capacity: Int) -> QueueRecord {
        QueueRecord.build(owner: owner, missed: missed, returned: returnedEntries, arrived: arrivedEntries,
                          capacity: capacity, nowWallMs: nowWallMs) { _ in }
    }

    /// Returned entries in delivery order.
    var returnedEntries: [Entry] { entries.filter(\.returned) }
    /// The other entries in arrival order.
    var arrivedEntries: [Entry] { entries.filter { !$0.returned }.sorted { $0.rank < $1.rank } }

    private static func build(owner: QueueOwner, missed: UInt32, returned: [Entry], arrived: [Entry], capacity: Int,
                              nowWallMs: UInt64, lastOutcome: (DeviceQueue.Outcome) -> Void) -> QueueRecord {
        var queue = DeviceQueue(capacity: capacity)
        var missed = missed
        var pushes: [UInt32: ClusterPush] = [:]
        var rank: UInt32 = 0
        func queued(_ entry: Entry) -> QueuedPush {
            rank += 1
            pushes[rank] = entry.push
            return QueuedPush(sequence: rank, frame: [], priority: entry.push.priority, collapseKey: entry.push.collapseKey,
                              expiresAtMs: Int64(clamping: entry.push.expiresAtWallMs))
        }
        let now = Int64(clamping: nowWallMs)
        missed &+= UInt32(truncatingIfNeeded: queue.returnToFront(returned.map(queued)))
        for entry in arrived {
            missed &+= UInt32(truncatingIfNeeded: queue.dropExpired(nowMs: now))
            let outcome = queue.enqueue(queued(entry), nowMs: now)
            if outcome == .queuedDroppingOldest { missed &+= 1 }
            lastOutcome(outcome)
        }
        missed &+= UInt32(truncatingIfNeeded: queue.dropExpired(nowMs: now))
        let returnedCount = queue.returnedAtFront
        var entries: [Entry] = []
        entries.reserveCapacity(queue.count)
        for (index, push) in queue.entries.enumerated() {
            guard let original = pushes[push.sequence] else { continue }
            entries.append(Entry(push: original, returned: index < returnedCount, rank: push.sequence))
        }
        return QueueRecord(owner: owner, missed: missed, entries: entries)
    }
}
