import PushClock
import PushEventLoop
import PushNATS
import PushSession
import PushWire

/// A cluster node's pushes: forwarded to the nodes holding the targets not connected here
/// (a loop turn's pushes for one node in one message), or queued in JetStream.
///
/// The cluster decides none of where a push goes (`GatewayLogic.routeOnNode`): it carries
/// out the route's `.node` and `.queue` destinations, and counts as not reached what NATS
/// or JetStream could not take ([4.13-13]).
extension GatewayCluster {
    /// A push for devices at another node, waiting for the end of the loop turn: the
    /// turn's pushes for one node leave together.
    struct OutgoingForward {
        var push: ClusterPush
        var targets: ArraySlice<QueueTarget>
        var tally: PushTally
    }

    struct AwaitedBatch {
        var node: String
        var forwards: [OutgoingForward]
        var timer: LoopTimer
    }

    /// Carries out `.node`: the push goes to `node` for `targets`, in parts of at most
    /// `maxDevicesPerForward` devices, each a part of `tally`.
    func forward(_ push: ClusterPush, to targets: [QueueTarget], at node: String, tally: PushTally) {
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

    /// No answer in time (the node died, or NATS is away): the route's rule for devices it
    /// cannot reach live applies (`GatewayLogic.forwardFailed`).
    func queueInstead(_ awaited: AwaitedBatch) {
        metrics.forwardsFailed.increment()
        if linkIsUp {
            logger.warning("a cluster node did not answer forwarded pushes; queueing them in JetStream",
                           metadata: ["node": "\(awaited.node)", "pushes": "\(awaited.forwards.count)"])
        } else {
            // Said once when the link went silent; the queue writes fail as well until it is back.
            logger.debug("the NATS link is down: forwarded pushes go unanswered", metadata: ["node": "\(awaited.node)"])
        }
        for forward in awaited.forwards {
            server?.routeShare(into: forward.tally) {
                logic.forwardFailed(forward.push, for: forward.targets)
                return PushAck(written: 0, queued: 0)
            }
            forward.tally.end()
        }
    }

    /// Devices that only NATS could reach, and it could not be reached.
    func unreachable(_ devices: UInt32, tally: PushTally) {
        tally.add(unreached: devices)
        metrics.unreached.increment(by: Int64(devices))
    }

    /// Carries out `.queue`: appends `push` to the device's queue record; a push with `once`
    /// the record holds already is not appended again and counts as queued, as the first did
    /// ([4.13-12]); a record that cannot be written counts the device as not reached.
    func queue(_ push: ClusterPush, for target: QueueTarget, tally: PushTally) {
        let deviceID = target.deviceID
        let owner = target.owner
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

    /// Another node's pushes for devices it believes are connected here: each one's share
    /// is routed here (`GatewayLogic.deliverForwarded`), and the counts go back in one reply
    /// once the queue writes for the devices that left are done.
    func forwardArrived(_ message: NATSMessage) {
        guard let opened = opened(message), let server else { return }
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
            let share = server.routeShare(tally: {
                PushTally { ack in
                    counts[index].queued &+= ack.queued
                    all.end()
                }
            }) {
                let delivered = logic.deliverForwarded(forwarded)
                return PushAck(written: delivered.written, queued: delivered.queued)
            }
            counts[index] = ForwardReplies.Counts(written: share.ack.written, queued: share.ack.queued)
            guard let part = share.tally else { continue }
            all.begin()
            part.seal()
        }
        all.seal()
    }
}
