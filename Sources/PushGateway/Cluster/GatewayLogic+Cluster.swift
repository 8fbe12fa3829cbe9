import PushClock
import PushSession
import PushWire

/// The parts of routing a cluster node does differently: a device's queue leaves the node
/// with its connection (as a `QueueRecord` for JetStream) and arrives with the next one.
extension GatewayLogic {
    /// A push as a node delivers it: its own sequence number and frame, and its TTL on
    /// this node's monotonic clock.
    func localPush(_ push: ClusterPush, nowWallMs: UInt64, nowMonotonicMs: Int64) -> QueuedPush {
        let sequence = takeSequence()
        let expiresAtMs = push.connectedOnly
            ? Int64.max : nowMonotonicMs + (Int64(clamping: push.expiresAtWallMs) - Int64(clamping: nowWallMs))
        return QueuedPush(sequence: sequence, frame: push.deviceFrame(correlation: sequence), priority: push.priority,
                          collapseKey: push.collapseKey, expiresAtMs: expiresAtMs, connectedOnly: push.connectedOnly,
                          once: push.once, writtenAtNs: Clocks.monotonicNanoseconds())
    }

    /// Takes a device's record off this node once its connection is gone: what it holds
    /// (the unacknowledged pushes put back first, and MISSED not yet told) as a record to
    /// merge into its queue in JetStream; nil if it held nothing.
    func release(_ record: DeviceRecord) -> QueueRecord? {
        guard record.link == nil else { return nil }
        devices[ExactName(record.deviceID)] = nil
        guard !record.queue.isEmpty || record.missed > 0 else { return nil }
        let nowWall = wallClock()
        let nowMonotonic = monotonicNow()
        let returnedCount = record.queue.returnedAtFront
        // Ranks follow the local arrival order (sequence numbers, which wrap).
        let byArrival = record.queue.entries.map(\.sequence).sorted(by: sequenceOrder)
        var rankOf: [UInt32: UInt32] = [:]
        for (index, sequence) in byArrival.enumerated() { rankOf[sequence] = UInt32(index + 1) }
        var entries: [QueueRecord.Entry] = []
        for (index, push) in record.queue.entries.enumerated() where !push.connectedOnly {
            let wallExpiry = Int64(clamping: nowWall) + (push.expiresAtMs - nowMonotonic)
            let clusterPush = ClusterPush(deviceFrame: push.frame, priority: push.priority, collapseKey: push.collapseKey,
                                          expiresAtWallMs: UInt64(max(1, wallExpiry)), once: push.once)
            entries.append(QueueRecord.Entry(push: clusterPush, returned: index < returnedCount, rank: rankOf[push.sequence] ?? 0))
        }
        return QueueRecord(owner: queueOwner(of: record), missed: record.missed, entries: entries)
    }

    /// Whose pushes a device's queue holds: its user's, for the registration it connected
    /// with when the gateway follows a registry (only the enrolled one is admitted).
    func queueOwner(of record: DeviceRecord) -> QueueOwner {
        QueueOwner(user: record.user, enrolment: registry == nil ? 0 : record.linkIssuedAt)
    }

    /// A queue taken from JetStream for a device connected here: its returned pushes go
    /// ahead of what waits, the rest join the queue by priority, and its missed count
    /// joins the device's. Then as much as the window allows is written.
    func absorb(_ taken: QueueRecord, into record: DeviceRecord) {
        guard record.link != nil else { return }
        // Pushes for another enrolment are not this one's: the device was revoked or
        // enrolled again since, and they went with it ([4.14-9]).
        guard taken.isUnowned || taken.owner == queueOwner(of: record) else { return }
        let nowWall = wallClock()
        let nowMonotonic = monotonicNow()
        // The device's pushes with `once` are queued here now: a repeat forwarded here, or
        // routed here, is answered from memory as queued ([4.13-12]).
        var rememberedOnce = false
        for entry in taken.entries where entry.push.once {
            guard let id = entry.push.id else { continue }
            once.remember(Array(id), device: record.deviceID, .queued, nowMs: nowMonotonic)
            rememberedOnce = true
        }
        if rememberedOnce { metrics.onceRemembered.set(once.count) }
        // What waits here arrived after what the record holds, so it goes behind it, and
        // a full queue drops the record's oldest first, as on one node.
        let waiting = Array(record.queue.entries)
        let waitingReturned = record.queue.returnedAtFront
        record.queue = DeviceQueue(capacity: settings.queueCapacity)
        let returned = Array(waiting.prefix(waitingReturned))
            + taken.returnedEntries.map { localPush($0.push, nowWallMs: nowWall, nowMonotonicMs: nowMonotonic) }
        let dropped = record.queue.returnToFront(returned)
        record.missed &+= taken.missed &+ UInt32(truncatingIfNeeded: dropped)
        for entry in taken.arrivedEntries {
            enqueue(localPush(entry.push, nowWallMs: nowWall, nowMonotonicMs: nowMonotonic), for: record)
        }
        for push in waiting.dropFirst(waitingReturned) { enqueue(resequenced(push), for: record) }
        pump(record)
    }

    /// The push under a new sequence number, so that it counts as arriving now.
    private func resequenced(_ push: QueuedPush) -> QueuedPush {
        var copy = push
        copy.sequence = takeSequence()
        // The frame's correlation id is the sequence (bytes 4 to 7 of the header, big-endian).
        let sequence = copy.sequence
        copy.frame.withUnsafeMutableBytes { bytes in
            guard bytes.count >= FrameHeader.size else { return }
            bytes.storeBytes(of: sequence.bigEndian, toByteOffset: 4, as: UInt32.self)
        }
        return copy
    }

    /// A later connection of this device exists on another node ([5.5-3]): this one ends
    /// with GOAWAY REPLACED, and what it held leaves with `release`.
    func replacedElsewhere(_ deviceID: String) -> DeviceRecord? {
        guard let record = devices[ExactName(deviceID)], let link = record.link else { return nil }
        record.link = nil
        metrics.devicesOnline.decrement()
        takeBackInFlight(record)
        actions.append(.replaced(link))
        return record
    }
}
