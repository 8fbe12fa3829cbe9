/// A record changes under the rules of a device's queue on one node ([4.13-5], [4.13-9],
/// [4.15-3]): `DeviceQueue` applies them, with wall-clock milliseconds for expiry (nodes
/// share no monotonic clock) and each entry's rank as its arrival order.
extension QueueRecord {
    /// The record with `push` added: expired pushes dropped and counted as missed, a push
    /// with the same collapse key replaced, the oldest dropped (and counted) when full.
    /// A record of another owner is emptied first: its device was enrolled again.
    ///
    /// A push with `once` that the record holds already ([4.13-12]: a repeat, which any
    /// node may have taken) is not added again: the record is returned as it is, with no
    /// outcome, and the push counts as queued, as the first one did.
    func appending(_ push: ClusterPush, for owner: QueueOwner, capacity: Int, nowWallMs: UInt64) -> (QueueRecord, DeviceQueue.Outcome?) {
        let base = self.owner == owner || isUnowned ? self : QueueRecord(owner: owner)
        if push.once, base.entries.contains(where: { $0.push.repeats(push) }) { return (self, nil) }
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

    /// The entries without the repeats of a push with `once` that an earlier entry holds
    /// ([4.13-12]), returned ones first: what a node hands over may hold a push that a
    /// repeat queued here meanwhile (the node had not yet told that the device left).
    private static func withoutRepeats(returned: [Entry], arrived: [Entry]) -> (returned: [Entry], arrived: [Entry]) {
        guard returned.contains(where: \.push.once) || arrived.contains(where: \.push.once) else { return (returned, arrived) }
        var seen: Set<ArraySlice<UInt8>> = []
        func first(_ entry: Entry) -> Bool {
            guard entry.push.once, let id = entry.push.id else { return true }
            return seen.insert(id).inserted
        }
        let keptReturned = returned.filter(first)
        return (keptReturned, arrived.filter(first))
    }

    private static func build(owner: QueueOwner, missed: UInt32, returned: [Entry], arrived: [Entry], capacity: Int,
                              nowWallMs: UInt64, lastOutcome: (DeviceQueue.Outcome) -> Void) -> QueueRecord {
        let (returned, arrived) = withoutRepeats(returned: returned, arrived: arrived)
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
