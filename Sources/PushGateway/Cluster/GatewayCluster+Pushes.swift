import PushClock
import PushEventLoop
import PushNATS
import PushSession
import PushWire

/// A cluster node's pushes: delivered here, forwarded to the nodes holding the other
/// targets (a loop turn's pushes for one node in one message), or queued in JetStream.
extension GatewayCluster {
    /// This loop's share of a provider's PUSH: delivered to targets connected here at once,
    /// forwarded to the nodes holding the others, queued in JetStream for offline ones; the
    /// counts join `tally` as each part is done ([4.13-3] across the cluster). On a node of
    /// several loops the share is the targets whose home this loop is: its registry and
    /// directory hold no others.
    func route(_ push: Push, tally: PushTally) {
        guard let target = push.target else { return }
        let nowWall = logic.wallClock()
        let local = logic.queuedPush(push)
        let connectedOnly = local.connectedOnly
        var remote: [String: [(deviceID: String, owner: QueueOwner)]] = [:]
        var offline: [(deviceID: String, owner: QueueOwner)] = []
        let window = logic.settings.deliveryWindow
        func visit(_ deviceID: String, owner: QueueOwner) {
            if let record = logic.devices[deviceID], record.link != nil {
                switch logic.deliver(local, to: record, window: window) {
                case .written: tally.add(written: 1)
                case .queued: tally.add(queued: 1)
                case .dropped: break
                }
            } else if let node = directory.node(of: deviceID), node != localNode {
                remote[node, default: []].append((deviceID, owner))
            } else if !connectedOnly {
                offline.append((deviceID, owner))
            }
        }
        if let registry = logic.registry {
            registry.forEachDevice(matching: target, nowMs: nowWall) {
                visit($0.deviceID, owner: QueueOwner(user: $0.registration.user, enrolment: $0.registration.issuedAt))
            }
        } else {
            directory.forEachDevice(matching: target) { visit($0, owner: QueueOwner(user: directory.devices[$0]?.user ?? "", enrolment: 0)) }
        }
        if !remote.isEmpty || !offline.isEmpty {
            let clusterPush = ClusterPush(deviceFrame: local.frame, priority: push.priority, collapseKey: push.collapseKey,
                                          expiresAtWallMs: connectedOnly ? 0 : nowWall + UInt64(push.ttlSeconds) * 1000)
            for (node, targets) in remote { forward(clusterPush, to: targets, at: node, tally: tally) }
            for target in offline { queue(clusterPush, for: target.deviceID, owner: target.owner, tally: tally) }
        }
        server?.carryOut()
    }

    /// A push for devices at another node, waiting for the end of the loop turn: the
    /// turn's pushes for one node leave together.
    struct OutgoingForward {
        var push: ClusterPush
        var targets: ArraySlice<(deviceID: String, owner: QueueOwner)>
        var tally: PushTally
    }

    struct AwaitedBatch {
        var node: String
        var forwards: [OutgoingForward]
        var timer: LoopTimer
    }

    func forward(_ push: ClusterPush, to targets: [(deviceID: String, owner: QueueOwner)], at node: String, tally: PushTally) {
        var start = 0
        while start < targets.count {
            let part = targets[start..<min(targets.count, start + configuration.maxDevicesPerForward)]
            start = part.endIndex
            tally.begin()
            metrics.pushesForwarded.increment()
            outgoing.append(OutgoingForward(push: push, targets: part, tally: tally), for: node)
        }
    }

    func send(_ forwards: [OutgoingForward], to node: String) {
        var start = 0
        while start < forwards.count {
            // Bounded by devices named, so a message stays well under NATS' size limit.
            var end = start
            var devices = 0
            while end < forwards.count, end == start || devices + forwards[end].targets.count <= configuration.maxDevicesPerForward {
                devices += forwards[end].targets.count
                end += 1
            }
            let part = Array(forwards[start..<end])
            start = end
            nextBatchID &+= 1
            let id = nextBatchID
            let batch = ForwardBatch(id: id, pushes: part.map { ForwardedPush(push: $0.push, deviceIDs: $0.targets.map(\.deviceID)) })
            let timer = loop.schedule(after: configuration.forwardTimeout) { [weak self] in self?.forwardTimedOut(id) }
            awaitingReplies[id] = AwaitedBatch(node: node, forwards: part, timer: timer)
            do {
                try connection.publish(subjects.pushes(for: node), batch.encoded(), reply: subjects.replies(for: localNode))
            } catch {
                forwardTimedOut(id)
            }
        }
    }

    func repliesArrived(_ message: NATSMessage) {
        guard let replies = try? ForwardReplies(decoding: message.data) else { return metrics.malformed.increment() }
        // A reply after its timeout finds nothing: those pushes were queued in JetStream.
        guard let awaited = awaitingReplies.removeValue(forKey: replies.id) else { return }
        awaited.timer.cancel()
        guard replies.counts.count == awaited.forwards.count else {
            metrics.malformed.increment()
            return queueInstead(awaited)
        }
        for (forward, counts) in zip(awaited.forwards, replies.counts) {
            forward.tally.add(written: counts.written, queued: counts.queued)
            forward.tally.end()
        }
    }

    func forwardTimedOut(_ id: UInt64) {
        guard let awaited = awaitingReplies.removeValue(forKey: id) else { return }
        awaited.timer.cancel()
        queueInstead(awaited)
    }

    /// No answer in time (the node died, or NATS is away): the batch's pushes wait in
    /// JetStream. Should the node just have been slow, a device may be told twice; it
    /// shows each payload once all the same.
    func queueInstead(_ awaited: AwaitedBatch) {
        metrics.forwardsFailed.increment()
        logger.warning("a cluster node did not answer forwarded pushes; queueing them in JetStream",
                       metadata: ["node": "\(awaited.node)", "pushes": "\(awaited.forwards.count)"])
        for forward in awaited.forwards {
            if !forward.push.connectedOnly {
                for target in forward.targets { queue(forward.push, for: target.deviceID, owner: target.owner, tally: forward.tally) }
            }
            forward.tally.end()
        }
    }

    func queue(_ push: ClusterPush, for deviceID: String, owner: QueueOwner, tally: PushTally) {
        tally.begin()
        queues.submit(.append(push, owner: owner) { [weak self] written in
            if written {
                tally.add(queued: 1)
                self?.notifyHolder(of: deviceID)
            }
            tally.end()
        }, for: deviceID)
    }

    func forwardArrived(_ message: NATSMessage) {
        guard let replySubject = message.reply, let batch = try? ForwardBatch(decoding: message.data) else {
            return metrics.malformed.increment()
        }
        metrics.forwardsReceived.increment(by: Int64(batch.pushes.count))
        var counts = [ForwardReplies.Counts](repeating: ForwardReplies.Counts(written: 0, queued: 0), count: batch.pushes.count)
        let all = PushTally { [weak self] _ in
            try? self?.connection.publish(replySubject, ForwardReplies(id: batch.id, counts: counts).encoded())
        }
        for (index, forwarded) in batch.pushes.enumerated() {
            let delivered = logic.deliverForwarded(forwarded)
            server?.carryOut()
            counts[index] = ForwardReplies.Counts(written: delivered.written, queued: delivered.queued)
            guard !forwarded.push.connectedOnly, !delivered.away.isEmpty else { continue }
            // Left or moved on since the sender looked: their pushes wait in JetStream.
            all.begin()
            let part = PushTally { ack in
                counts[index].queued &+= ack.queued
                all.end()
            }
            for deviceID in delivered.away { queue(forwarded.push, for: deviceID, owner: owner(of: deviceID), tally: part) }
            part.seal()
        }
        all.seal()
    }

    func owner(of deviceID: String) -> QueueOwner {
        if let enrolled = logic.registry?.enrolledRegistration(of: deviceID, nowMs: logic.wallClock()) {
            return QueueOwner(user: enrolled.registration.user, enrolment: enrolled.registration.issuedAt)
        }
        return QueueOwner(user: directory.devices[deviceID]?.user ?? "", enrolment: 0)
    }
}
