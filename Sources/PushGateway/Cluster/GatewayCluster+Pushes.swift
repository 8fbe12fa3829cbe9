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
    /// directory hold no others. With `user`, only that user's devices ([4.13-11]).
    ///
    /// A push with `once` 1 ([4.13-12]) may come again through any node, which routes it
    /// as here: what each part remembers answers the repeat. A device's home is where it
    /// is connected, so the member that delivered the push to a device (from its own PUSH
    /// or one forwarded to it) remembers what became of it there (`OnceMemory`, per device
    /// and id), and a device's queue record in JetStream, the home of an offline device,
    /// keeps the push with its `once` flag, so that appending it again changes nothing
    /// (`QueueRecord.appending`). A member that takes a queue remembers its pushes with
    /// `once` as queued for the device (`GatewayLogic.absorb`). While devices stay where
    /// they were, a repeat is written and queued nowhere and gets the first counts.
    ///
    /// Not covered, as each node remembers only what passed through it:
    /// - a device that acknowledged the push and has moved since (offline, or connected to
    ///   another member) gets a repeat again, as nothing it moved with remembers the id;
    /// - counts follow the devices: a push written to a device that has left since, its
    ///   copy back in its queue record, counts as queued in a repeat's PUSH_ACK;
    /// - a device a member had not reached with the push (one that connected meanwhile)
    ///   gets a repeat, where a gateway alone would answer from memory and deliver nothing;
    /// - a node that restarts forgets what it remembered (as the spec allows), and a forward
    ///   that times out is queued in JetStream whether or not the slow node delivered it;
    /// - a node of a build before `once` ignores the flag, and a record it rewrites loses it.
    func route(_ push: Push, tally: PushTally) {
        guard let target = push.target else { return }
        let nowWall = logic.wallClock()
        let local = logic.queuedPush(push)
        let connectedOnly = local.connectedOnly
        var remote: [String: [(deviceID: String, owner: QueueOwner)]] = [:]
        var offline: [(deviceID: String, owner: QueueOwner)] = []
        let window = logic.settings.window
        let user = push.user
        let onceID = push.once ? push.id : nil
        let nowMs = push.once ? logic.monotonicNow() : 0
        var repeated = false
        func visit(_ deviceID: String, owner: QueueOwner) {
            if let record = logic.devices[ExactName(deviceID)], record.link != nil {
                if let onceID, let outcome = logic.once.outcome(of: onceID, for: deviceID, nowMs: nowMs) {
                    repeated = true
                    tally.add(written: outcome == .written ? 1 : 0, queued: outcome == .queued ? 1 : 0)
                    return
                }
                let delivery = logic.deliver(local, to: record, window: window)
                switch delivery {
                case .written: tally.add(written: 1)
                case .queued: tally.add(queued: 1)
                case .dropped: break
                }
                if let onceID { logic.rememberOnce(onceID, delivery, for: deviceID, nowMs: nowMs) }
            } else if let node = directory.node(of: deviceID), node != localNode {
                remote[node, default: []].append((deviceID, owner))
            } else if !connectedOnly {
                offline.append((deviceID, owner))
            }
        }
        if let registry = logic.registry {
            registry.forEachDevice(matching: target, nowMs: nowWall) {
                if let user, !$0.registration.user.isExactly(user) { return }
                visit($0.deviceID, owner: QueueOwner(user: $0.registration.user, enrolment: $0.registration.issuedAt))
            }
        } else {
            directory.forEachDevice(matching: target) { deviceID in
                let owner = QueueOwner(user: directory.devices[ExactName(deviceID)]?.user ?? "", enrolment: 0)
                if let user, !owner.user.isExactly(user) { return }
                visit(deviceID, owner: owner)
            }
        }
        if repeated { logic.metrics.pushesRepeated.increment() }
        // Looking ids up forgets those whose window is up.
        if push.once { logic.metrics.onceRemembered.set(logic.once.count) }
        if !remote.isEmpty || !offline.isEmpty {
            guard linkIsUp else {
                // Forwards and queue writes could not go out: these devices are refused
                // rather than left uncounted, so that the sender retries ([4.13-13]).
                unreachable(UInt32(clamping: remote.values.reduce(offline.count) { $0 + $1.count }), tally: tally)
                server?.carryOut()
                return
            }
            let clusterPush = ClusterPush(deviceFrame: local.frame, priority: push.priority, collapseKey: push.collapseKey,
                                          expiresAtWallMs: connectedOnly ? 0 : nowWall + UInt64(logic.settings.ttlSeconds(of: push)) * 1000,
                                          user: user, once: push.once)
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
            // Not left in the reconnect buffer while the link is down: delivered after the
            // timeout, it would be written while its PUSH_ACK says it was not.
            do {
                guard connection.isConnected else { throw NATSError.notConnected }
                try publishSealed(subjects.pushes(for: node), batch.encoded())
            } catch {
                forwardTimedOut(id)
            }
        }
    }

    func repliesArrived(_ message: NATSMessage) {
        guard let opened = opened(message) else { return }
        guard let replies = try? ForwardReplies(decoding: opened.message) else { return metrics.malformed.increment() }
        // A reply after its timeout finds nothing: those pushes were queued in JetStream.
        // Only the node the batch went to answers it.
        guard let awaited = awaitingReplies[replies.id] else { return }
        guard awaited.node == opened.sender else { return rejected(.wrongSender, message) }
        awaitingReplies[replies.id] = nil
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
        if linkIsUp {
            logger.warning("a cluster node did not answer forwarded pushes; queueing them in JetStream",
                           metadata: ["node": "\(awaited.node)", "pushes": "\(awaited.forwards.count)"])
        } else {
            // Said once when the link went silent; the queue writes fail as well until it is back.
            logger.debug("the NATS link is down: forwarded pushes go unanswered", metadata: ["node": "\(awaited.node)"])
        }
        let linkUp = linkIsUp
        for forward in awaited.forwards {
            if !forward.push.connectedOnly {
                for target in forward.targets { queue(forward.push, for: target.deviceID, owner: target.owner, tally: forward.tally) }
            } else if !linkUp {
                // Connected elsewhere, for all this node knows: not reached, rather than absent.
                unreachable(UInt32(forward.targets.count), tally: forward.tally)
            }
            forward.tally.end()
        }
    }

    /// Devices that only NATS could reach, and it could not be reached.
    func unreachable(_ devices: UInt32, tally: PushTally) {
        tally.add(unreached: devices)
        metrics.unreached.increment(by: Int64(devices))
    }

    /// Appends `push` to the device's queue record; a push with `once` the record holds
    /// already is not appended again and counts as queued, as the first did ([4.13-12]).
    func queue(_ push: ClusterPush, for deviceID: String, owner: QueueOwner, tally: PushTally) {
        tally.begin()
        queues.submit(.append(push.queued, owner: owner) { [weak self] written in
            if written {
                tally.add(queued: 1)
                self?.notifyHolder(of: deviceID)
            } else {
                self?.unreachable(1, tally: tally)
            }
            tally.end()
        }, for: deviceID)
    }

    func forwardArrived(_ message: NATSMessage) {
        guard let opened = opened(message) else { return }
        guard let batch = try? ForwardBatch(decoding: opened.message) else { return metrics.malformed.increment() }
        // Answered on the sender's reply subject, named by the authenticated sender rather
        // than by the message's reply field, which the tag does not cover.
        let replySubject = subjects.replies(for: opened.sender)
        metrics.forwardsReceived.increment(by: Int64(batch.pushes.count))
        var counts = [ForwardReplies.Counts](repeating: ForwardReplies.Counts(written: 0, queued: 0), count: batch.pushes.count)
        let all = PushTally { [weak self] _ in
            try? self?.publishSealed(replySubject, ForwardReplies(id: batch.id, counts: counts).encoded())
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
            for deviceID in delivered.away {
                let owner = owner(of: deviceID)
                // [4.13-11]: enrolled again for another user since the sender looked.
                if let user = forwarded.push.user, !owner.user.isExactly(user) { continue }
                queue(forwarded.push, for: deviceID, owner: owner, tally: part)
            }
            part.seal()
        }
        all.seal()
    }

    func owner(of deviceID: String) -> QueueOwner {
        if let enrolled = logic.registry?.enrolledRegistration(of: ExactName(deviceID), nowMs: logic.wallClock()) {
            return QueueOwner(user: enrolled.registration.user, enrolment: enrolled.registration.issuedAt)
        }
        return QueueOwner(user: directory.devices[ExactName(deviceID)]?.user ?? "", enrolment: 0)
    }
}
