import PushWire

/// A cluster node's share of a push, decided as values like the rest of the route: the
/// devices connected here get it now, the others go to their node (`.node`) or to their
/// queue in JetStream (`.queue`) as `.forward` actions, which `GatewayCluster` carries out.
///
/// A push with `once` 1 ([4.13-12]) may come again through any node, which routes it as
/// here: what each part remembers answers the repeat. A device's home is where it is
/// connected, so the member that delivered the push to a device (from its own PUSH or one
/// forwarded to it) remembers what became of it there (`OnceMemory`, per device and id),
/// and a device's queue record in JetStream, the home of an offline device, keeps the push
/// with its `once` flag, so that appending it again changes nothing
/// (`QueueRecord.appending`). A member that takes a queue remembers its pushes with `once`
/// as queued for the device (`absorb`). While devices stay where they were, a repeat is
/// written and queued nowhere and gets the first counts.
///
/// Not covered, as each node remembers only what passed through it:
/// - a device that acknowledged the push and has moved since (offline, or connected to
///   another member) gets a repeat again, as nothing it moved with remembers the id;
/// - counts follow the devices: a push written to a device that has left since, its copy
///   back in its queue record, counts as queued in a repeat's PUSH_ACK;
/// - a device a member had not reached with the push (one that connected meanwhile) gets a
///   repeat, where a gateway alone would answer from memory and deliver nothing;
/// - a node that restarts forgets what it remembered (as the spec allows), and a forward
///   that times out is queued in JetStream whether or not the slow node delivered it;
/// - a node of a build before `once` ignores the flag, and a record it rewrites loses it.
extension GatewayLogic {
    /// What the route of a cluster node knows of the cluster: where the devices not
    /// connected here are, and whether NATS answers now (`GatewayCluster.linkIsUp`).
    struct ClusterView {
        let directory: ClusterDirectory
        let linkIsUp: () -> Bool
    }

    /// This loop's share of a provider's PUSH on a cluster node ([4.13-3] across the
    /// cluster). On a node of several loops the share is the targets whose home this loop
    /// is: its registry and directory hold no others. With `user`, only that user's
    /// devices ([4.13-11]).
    func routeOnNode(_ push: Push, to target: PushTarget, cluster: ClusterView) -> PushAck {
        let directory = cluster.directory
        let nowWall = wallClock()
        let local = queuedPush(push)
        let onceID = push.once ? push.id : nil
        let nowMs = push.once ? monotonicNow() : 0
        let window = settings.window
        var count = ShareCount()
        var elsewhere = NodeShares()
        forEachClusterTarget(target, user: push.user, nowWallMs: nowWall) { device in
            if let record = devices[ExactName(device.deviceID)], record.link != nil {
                deliverOnNode(local, to: record, once: onceID, nowMs: nowMs, window: window, count: &count)
            } else if let node = directory.node(of: device.deviceID), node != directory.localNode {
                elsewhere.add(device, at: node)
            } else if !local.connectedOnly {
                elsewhere.offline.append(device)
            }
        }
        if count.repeated { metrics.pushesRepeated.increment() }
        // Looking ids up forgets those whose window is up.
        if push.once { metrics.onceRemembered.set(once.count) }
        guard !elsewhere.isEmpty else { return count.ack }
        guard cluster.linkIsUp() else {
            // Forwards and queue writes could not go out: these devices are refused rather
            // than left uncounted, so that the sender retries ([4.13-13]).
            actions.append(.forward(to: .unreachable(devices: elsewhere.deviceCount)))
            return count.ack
        }
        let clusterPush = ClusterPush(deviceFrame: local.frame, priority: push.priority, collapseKey: push.collapseKey,
                                      expiresAtWallMs: local.connectedOnly ? 0 : nowWall + UInt64(settings.ttlSeconds(of: push)) * 1000,
                                      user: push.user, once: push.once)
        for (node, devices) in elsewhere.byNode { actions.append(.forward(to: .node(node, clusterPush, devices: devices))) }
        queueElsewhere(clusterPush, for: elsewhere.offline)
        return count.ack
    }

    /// A push forwarded by another node for devices that node believes are connected here:
    /// delivered to those that are; the others are returned as `away`, and the push goes to
    /// their queues in JetStream (`queueElsewhere`). A device connected here under another
    /// user's registration than the push's `user` gets nothing ([4.13-11]), and one this
    /// member delivered the push with `once` to already is answered from memory ([4.13-12]).
    func deliverForwarded(_ forwarded: ForwardedPush) -> (written: UInt32, queued: UInt32, away: [String]) {
        let nowMonotonic = monotonicNow()
        let queued = localPush(forwarded.push, nowWallMs: wallClock(), nowMonotonicMs: nowMonotonic)
        let user = forwarded.push.user
        let onceID = forwarded.push.once ? forwarded.push.id.map(Array.init) : nil
        var count = ShareCount()
        var away: [String] = []
        let window = settings.window
        for deviceID in forwarded.deviceIDs {
            guard let record = devices[ExactName(deviceID)], record.link != nil else {
                away.append(deviceID)
                continue
            }
            if let user, record.user != user { continue }
            deliverOnNode(queued, to: record, once: onceID, nowMs: nowMonotonic, window: window, count: &count)
        }
        if count.repeated { metrics.pushesRepeated.increment() }
        if onceID != nil { metrics.onceRemembered.set(once.count) }
        // Left or moved on since the sender looked.
        queueElsewhere(forwarded.push, for: away.map { QueueTarget(deviceID: $0, owner: owner(of: $0)) })
        return (count.written, count.queued, away)
    }

    /// A forward no node answered in time (the node died, or NATS is away): its devices'
    /// share waits in JetStream, as for devices connected nowhere. Should the node just
    /// have been slow, a device may be told twice; it shows each payload once all the same.
    /// A connected-only push goes nowhere then; while NATS cannot be reached its devices
    /// count as not reached, as connected elsewhere for all this node knows ([4.13-13]).
    func forwardFailed(_ push: ClusterPush, for devices: some Collection<QueueTarget>) {
        if push.connectedOnly, let clusterView, !clusterView.linkIsUp() {
            actions.append(.forward(to: .unreachable(devices: UInt32(clamping: devices.count))))
        }
        queueElsewhere(push, for: devices)
    }

    /// The rule for a device the push cannot reach live: its queue in JetStream, unless the
    /// push is for connected devices only, or names another user than the queue's owner
    /// ([4.13-11]: enrolled again for another user since).
    private func queueElsewhere(_ push: ClusterPush, for devices: some Sequence<QueueTarget>) {
        guard !push.connectedOnly else { return }
        for device in devices {
            if let user = push.user, !device.owner.user.isExactly(user) { continue }
            actions.append(.forward(to: .queue(push, device)))
        }
    }

    /// One device connected here: with `once`, answered from what this member remembers of
    /// it for the device; otherwise delivered, counted, and remembered ([4.13-12]).
    @inline(__always)
    private func deliverOnNode(_ queued: QueuedPush, to record: DeviceRecord, once onceID: [UInt8]?, nowMs: Int64,
                               window: DeliveryWindow, count: inout ShareCount) {
        if let onceID, let outcome = once.outcome(of: onceID, for: record.deviceID, nowMs: nowMs) {
            count.repeated = true
            count.add(outcome == .written ? .written : .queued)
            return
        }
        let delivery = deliver(queued, to: record, window: window)
        count.add(delivery)
        if let onceID { rememberOnce(onceID, delivery, for: record.deviceID, nowMs: nowMs) }
    }

    /// Remembers what became of the push with `once` and this id for a device connected
    /// here ([4.13-12]). A push dropped (connected devices only, and the device's
    /// connection went away) reached nothing and is not remembered.
    private func rememberOnce(_ id: [UInt8], _ delivery: Delivery, for deviceID: String, nowMs: Int64) {
        switch delivery {
        case .written: once.remember(id, device: deviceID, .written, nowMs: nowMs)
        case .queued: once.remember(id, device: deviceID, .queued, nowMs: nowMs)
        case .dropped: return
        }
        metrics.onceRemembered.set(once.count)
    }

    /// The devices a target matches across the cluster, with the owner of each one's queue:
    /// with a registry, every enrolled device; without, every device any node announced
    /// (SPEC 1.1). With `user`, only that user's ([4.13-11]).
    private func forEachClusterTarget(_ target: PushTarget, user: String?, nowWallMs: UInt64, _ body: (QueueTarget) -> Void) {
        if let registry {
            registry.forEachDevice(matching: target, nowMs: nowWallMs) {
                if let user, !$0.registration.user.isExactly(user) { return }
                body(QueueTarget(deviceID: $0.deviceID, owner: QueueOwner(user: $0.registration.user, enrolment: $0.registration.issuedAt)))
            }
        } else if let directory = clusterView?.directory {
            directory.forEachDevice(matching: target) { deviceID in
                let owner = QueueOwner(user: directory.devices[ExactName(deviceID)]?.user ?? "", enrolment: 0)
                if let user, !owner.user.isExactly(user) { return }
                body(QueueTarget(deviceID: deviceID, owner: owner))
            }
        }
    }

    /// Whose pushes a device's queue in JetStream holds, as this node knows it now.
    func owner(of deviceID: String) -> QueueOwner {
        if let enrolled = registry?.enrolledRegistration(of: ExactName(deviceID), nowMs: wallClock()) {
            return QueueOwner(user: enrolled.registration.user, enrolment: enrolled.registration.issuedAt)
        }
        return QueueOwner(user: clusterView?.directory.devices[ExactName(deviceID)]?.user ?? "", enrolment: 0)
    }
}

/// The devices of a push's share that leave this node: by node, in the order first met,
/// and those connected nowhere.
struct NodeShares {
    private(set) var byNode: [(node: String, devices: [QueueTarget])] = []
    private var nodeIndex: [String: Int] = [:]
    var offline: [QueueTarget] = []

    var isEmpty: Bool { byNode.isEmpty && offline.isEmpty }

    var deviceCount: UInt32 { UInt32(clamping: byNode.reduce(offline.count) { $0 + $1.devices.count }) }

    mutating func add(_ device: QueueTarget, at node: String) {
        if let index = nodeIndex[node] {
            byNode[index].devices.append(device)
        } else {
            nodeIndex[node] = byNode.count
            byNode.append((node, [device]))
        }
    }
}
