import Logging
import PushEventLoop
import PushNATS
import PushService
import PushSession
import PushWire

/// A gateway as a node of a cluster over NATS: it tells the other nodes which devices
/// connect and leave here, forwards pushes only to the nodes holding a target, serves
/// the pushes they forward, and keeps offline devices' queues in JetStream, where they
/// outlive a node and follow the device to the node it connects to next.
///
/// One NATS connection, driven on the gateway's own loop; every handler runs there.
/// Loop-confined.
final class GatewayCluster {
    let configuration: ClusterConfiguration
    let metrics: ClusterMetrics
    let logic: GatewayLogic
    /// The server whose logic this is: it carries out what the logic decides.
    weak var server: GatewayServer?
    let logger: Logger
    let loop: EventLoop
    let connection: NATSConnection
    private let jetStream: JetStream
    let directory: ClusterDirectory
    let queues: ClusterQueues
    /// Authenticates what this member sends and receives (`ClusterSeal`).
    let seal: ClusterSeal
    var replayGuard = ClusterReplayGuard(windowMs: ClusterSeal.windowMs)
    /// The nonce of the next message sent: a random start, one more per message.
    var nextNonce = UInt64.random(in: 0...UInt64.max)
    var lastRejectionWarningMs: Int64?
    /// Queue records refused (`refusedQueueRecord`), logged at most once a minute.
    var queueRecordRefusals = LogThrottle(intervalMs: 60_000)
    /// Failed reopens of the NATS connection, logged at most once a minute.
    var reopenLog = LogThrottle(intervalMs: 60_000)
    /// When the NATS client last gave up, until a reopened connection is up.
    var gaveUpAtMs: Int64?
    /// The node's boot, the same on each of its members (`ClusterConfiguration.boot`).
    private let boot: UInt64
    /// When a heartbeat of a build before node heartbeats (no `loops`) was last heard: while
    /// such nodes are about, every member of this node sends heartbeats of its own, the only
    /// ones they hear.
    private var previousBuildHeardMs: Int64?
    private var subscriptions: [NATSSubscription] = []
    private var heartbeatTimer: LoopTimer?
    private(set) var streamReady = false
    private var ensuringStream = false
    /// Bumped at each (re)connect: an answer to an earlier stream check is not this link's.
    private var streamGeneration = 0
    /// Set at a reconnect: once the stream answers, every device here has its queue taken.
    private var takeAllWhenStreamReady = false
    /// Whether the last heartbeat found the NATS link answering (for logging its changes).
    private var linkWasUp = true
    /// Set after (re)connecting: the next heartbeat asks every node for its presence.
    private var wantsPresence = true
    private var pendingPresence: [PresenceChange] = []
    private var presenceFlush: LoopTimer?
    /// Pushes for other nodes, one message per node at the end of the turn.
    private(set) var outgoing: TurnBatches<String, OutgoingForward>!
    /// Forwarded batches waiting for their node's reply, by batch id.
    var awaitingReplies: [UInt64: AwaitedBatch] = [:]
    var nextBatchID: UInt64 = 0
    private var stopped = false
    private var holds: [ExactName: Hold] = [:]
    /// Takes that failed (JetStream away or starting) for devices still connected here,
    /// and the delay before the next one (see `retryTake`).
    var takeRetries: [ExactName: LoopTimer] = [:]
    var takeRetryDelays: [ExactName: Duration] = [:]
    var unplacedQueues = UnplacedQueues()
    private var finishWaiters: [() -> Void] = []

    var subjects: ClusterSubjects { configuration.subjects }
    /// The name this loop goes by in the cluster (see `ClusterConfiguration.member`).
    var localNode: String { configuration.member }
    /// The node's first loop, which counts the nodes and tells of them coming and going.
    private var speaksForNode: Bool { configuration.loop == 0 }

    /// - Parameter placement: on a node of several loops, this loop's place: it keeps and
    ///   routes to only the devices whose home it is.
    init(configuration: ClusterConfiguration, logic: GatewayLogic, loop: EventLoop, seal: ClusterSeal,
         placement: LoopPlacement? = nil, logger: Logger) throws(NATSError) {
        self.seal = seal
        self.configuration = configuration
        boot = configuration.boot ?? UInt64.random(in: 1...UInt64.max)
        self.logic = logic
        self.loop = loop
        self.logger = logger
        metrics = ClusterMetrics(registry: logic.metrics.registry, countsNodes: configuration.loop == 0)
        connection = try NATSConnection(loop: loop, servers: configuration.servers, name: "securepush-gateway-\(configuration.member)",
                                        ping: configuration.natsPing, security: configuration.security, reopen: configuration.natsReopen)
        jetStream = JetStream(connection: connection)
        directory = ClusterDirectory(localNode: configuration.member, placement: placement)
        queues = ClusterQueues(jetStream: jetStream, subjects: configuration.subjects, capacity: logic.settings.queueCapacity,
                               maxPushTTLSeconds: logic.settings.maxPushTTLSeconds, seal: seal, writer: configuration.member,
                               wallClock: logic.wallClock, metrics: metrics)
        outgoing = TurnBatches(loop: loop) { [weak self] node, forwards in self?.send(forwards, to: node) }
        queues.onRefusedRecord = { [weak self] deviceID, error in self?.refusedQueueRecord(deviceID, error) }
        logic.clusterView = GatewayLogic.ClusterView(directory: directory) { [weak self] in self?.linkIsUp ?? false }
    }

    func start() throws(NATSError) {
        connection.onEvent = { [weak self] event in self?.connectionChanged(event) }
        subscriptions.append(try connection.subscribe(subjects.heartbeats) { [weak self] in self?.heartbeatArrived($0) })
        for subject in subjects.presenceSubjects(for: directory.placement) {
            subscriptions.append(try connection.subscribe(subject) { [weak self] in self?.presenceArrived($0) })
        }
        subscriptions.append(try connection.subscribe(subjects.pushes(for: localNode)) { [weak self] in self?.forwardArrived($0) })
        subscriptions.append(try connection.subscribe(subjects.takes(for: localNode)) { [weak self] in self?.takeNoticeArrived($0) })
        subscriptions.append(try connection.subscribe(subjects.replies(for: localNode)) { [weak self] in self?.repliesArrived($0) })
        heartbeatTimer = loop.schedule(after: configuration.heartbeatInterval, repeating: true) { [weak self] in self?.beat() }
        if connection.isConnected { connectionChanged(.connected) }
    }

    private func connectionChanged(_ event: NATSConnectionEvent) {
        switch event {
        case .connected, .reconnected:
            metrics.natsConnected.set(1)
            logger.info("connected to NATS", metadata: ["node": "\(localNode)", "event": "\(event)"])
            natsReopened()
            // Nobody could be heard while away: every node gets a full timeout to be heard
            // again, after our presence went out and theirs was asked for.
            directory.heardFromAll(nowMs: logic.monotonicNow())
            // Changes may have been lost while away: ask for everyone's presence, and tell ours.
            wantsPresence = true
            beat()
            announceAll()
            // Queues may have been written meanwhile for devices connected here, by nodes
            // that took this one for dead: taken once JetStream answers again.
            streamGeneration += 1
            streamReady = false
            ensuringStream = false
            takeAllWhenStreamReady = event == .reconnected
            ensureStream()
        case .disconnected:
            metrics.natsConnected.set(0)
            logger.warning("lost the connection to NATS; reconnecting", metadata: ["node": "\(localNode)"])
        case .gaveUp:
            metrics.natsConnected.set(0)
            natsGaveUp()
        case .closed:
            metrics.natsConnected.set(0)
        }
    }

    private func ensureStream() {
        guard !streamReady, !ensuringStream else { return }
        ensuringStream = true
        let generation = streamGeneration
        jetStream.ensureStream(queues.stream) { [weak self] result in
            guard let self, generation == self.streamGeneration else { return }
            self.ensuringStream = false
            switch result {
            case .success:
                self.streamReady = true
                if self.takeAllWhenStreamReady {
                    self.takeAllWhenStreamReady = false
                    self.takeEveryLocalQueue()
                }
            case .failure(let error):
                self.logger.error("cannot set up the JetStream stream for offline queues (is JetStream enabled: nats-server -js?)",
                                  metadata: ["error": "\(error)", "stream": "\(self.subjects.streamName)"])
                _ = self.loop.schedule(after: .seconds(1)) { [weak self] in self?.ensureStream() }
            }
        }
    }

    // MARK: nodes

    /// Whether a node of a build before node heartbeats and presence buckets was heard lately.
    private func previousBuildAround(nowMs: Int64) -> Bool {
        previousBuildHeardMs.map { nowMs - $0 <= 2 * Int64(configuration.nodeTimeout / .milliseconds(1)) } ?? false
    }

    /// The node's loops: the members its heartbeat speaks for.
    private var loops: Int { directory.placement?.count ?? 1 }

    private func beat() {
        guard !stopped else { return }
        let nowMs = logic.monotonicNow()
        // Loop 0's heartbeat speaks for the node; another loop sends one only to ask for
        // presence, or for nodes of the previous build, which hear no other.
        if speaksForNode || wantsPresence || previousBuildAround(nowMs: nowMs) {
            let heartbeat = NodeHeartbeat(node: localNode, boot: boot, devices: Int(logic.metrics.devicesOnline.value),
                                          wantsPresence: wantsPresence, loops: loops)
            if connection.isConnected, (try? publishSealed(subjects.heartbeats, heartbeat.encoded())) != nil {
                wantsPresence = false
            }
        }
        let linkUp = linkIsUp
        if linkUp != linkWasUp {
            linkWasUp = linkUp
            if linkUp {
                logger.info("the NATS link answers again", metadata: ["node": "\(localNode)"])
            } else {
                logger.warning("the NATS link is silent; not ready, devices here are still served", metadata: ["node": "\(localNode)"])
            }
        }
        if linkUp {
            let deadline = nowMs - Int64(configuration.nodeTimeout / .milliseconds(1))
            for node in directory.removeNodes(silentSince: deadline) where speaksForNode && !node.contains(ClusterConfiguration.memberSeparator) {
                logger.warning("a cluster node went silent; its devices count as offline until they connect again", metadata: ["node": "\(node)"])
            }
        } else {
            // Cut off, this node hears nobody: the others are not taken for dead for it.
            directory.heardFromAll(nowMs: nowMs)
        }
        countNodes()
    }

    /// Nodes heard from, this one included; a node of several loops counts once.
    private func countNodes() {
        guard let gauge = metrics.nodesAlive else { return }
        var nodes: Set<Substring> = [Substring(configuration.node)]
        for member in directory.nodes.keys { nodes.insert(ClusterConfiguration.node(ofMember: member)) }
        gauge.set(nodes.count)
    }

    private func heartbeatArrived(_ message: NATSMessage) {
        guard let opened = opened(message) else { return }
        guard let heartbeat = try? NodeHeartbeat(decoding: opened.message) else { return metrics.malformed.increment() }
        guard heartbeat.node == opened.sender else { return rejected(.wrongSender, message) }
        // This node's own members share its process: alive while it is, never tracked.
        if ClusterConfiguration.node(ofMember: heartbeat.node) == configuration.node {
            if heartbeat.boot != boot {
                logger.error("another gateway uses this node name; give each node its own --node", metadata: ["node": "\(configuration.node)"])
            }
            return
        }
        let nowMs = logic.monotonicNow()
        if heartbeat.loops == 0 { previousBuildHeardMs = nowMs }
        guard let effect = directory.heard(heartbeat, nowMs: nowMs) else { return metrics.malformed.increment() }
        for member in effect.arrived where speaksForNode && !member.contains(ClusterConfiguration.memberSeparator) {
            logger.info("a cluster node joined", metadata: ["node": "\(member)", "loops": "\(max(1, heartbeat.loops))"])
        }
        countNodes()
        if effect.announce { announceAll() }
        if effect.askForPresence { askForPresence() }
    }

    /// The next heartbeat, sent now, asks every node for its presence.
    private func askForPresence() {
        wantsPresence = true
        beat()
    }

    // MARK: presence

    private func presenceArrived(_ message: NATSMessage) {
        guard let opened = opened(message) else { return }
        guard let batch = try? PresenceBatch(decoding: opened.message) else { return metrics.malformed.increment() }
        guard batch.node == opened.sender else { return rejected(.wrongSender, message) }
        // A sibling holds only devices whose home it is, none of this member's.
        guard ClusterConfiguration.node(ofMember: batch.node) != configuration.node else { return }
        if directory.heard(from: batch.node, boot: batch.boot, nowMs: logic.monotonicNow()) != .known {
            announceAll()
            // This batch may be one change: the rest of what that node holds is asked for.
            askForPresence()
        }
        for change in batch.changes {
            if case .replaceLocal(let deviceID) = directory.apply(change, from: batch.node) { replaceElsewhere(deviceID) }
        }
        askToTakeUnplaced(batch.changes, from: batch.node)
    }

    private func announce(_ change: PresenceChange) {
        pendingPresence.append(change)
        // Changes of one loop turn (a burst of connects) go in one message.
        guard presenceFlush == nil else { return }
        presenceFlush = loop.schedule(after: .zero) { [weak self] in
            guard let self else { return }
            self.presenceFlush = nil
            let changes = self.pendingPresence
            self.pendingPresence = []
            self.publishPresence(changes)
        }
    }

    private func announceAll() {
        publishPresence(directory.localPresence())
    }

    /// A batch per bucket, each change in its device's; also unbucketed while a node of the
    /// previous build, which hears only that, is about.
    private func publishPresence(_ changes: [PresenceChange]) {
        var byBucket: [Int: [PresenceChange]] = [:]
        for change in changes { byBucket[ClusterSubjects.presenceBucket(of: change.deviceID), default: []].append(change) }
        for (bucket, changes) in byBucket {
            guard publishPresence(changes, on: subjects.presence(bucket: bucket)) else { return }
        }
        if previousBuildAround(nowMs: logic.monotonicNow()) { _ = publishPresence(changes, on: subjects.presence) }
    }

    private func publishPresence(_ changes: [PresenceChange], on subject: String) -> Bool {
        var start = 0
        while start < changes.count {
            let end = min(changes.count, start + 1_000)
            let batch = PresenceBatch(node: localNode, boot: boot, changes: Array(changes[start..<end]))
            do {
                try publishSealed(subject, batch.encoded())
            } catch {
                logger.warning("cannot publish presence; it is sent again after reconnecting", metadata: ["error": "\(error)"])
                return false
            }
            start = end
        }
        return true
    }

    // MARK: devices

    /// A device was admitted here: every node learns it, and its queue comes from JetStream.
    func deviceArrived(_ record: DeviceRecord) {
        let deviceID = record.deviceID
        unplacedQueues.forget(deviceID)
        let previous = directory.node(of: deviceID)
        let stamp = directory.stampForNewConnection(of: deviceID, wallMs: logic.wallClock())
        let change = PresenceChange(deviceID: deviceID, online: true, stamp: stamp, user: record.user, tags: record.tags.list)
        directory.apply(change, from: localNode)
        announce(change)
        // New pushes wait until the queue in JetStream is here and, when another node
        // still held the device, until that node has handed over (or not, in time).
        holds[ExactName(deviceID)]?.handover?.cancel()
        var hold = Hold(takePending: true, handover: nil)
        if let previous, previous != localNode {
            hold.handover = loop.schedule(after: configuration.forwardTimeout) { [weak self] in self?.handoverDone(deviceID) }
        }
        holds[ExactName(deviceID)] = hold
        record.holdsForQueue = true
        take(deviceID)
    }

    /// Why a device's new pushes wait (see `DeviceRecord.holdsForQueue`).
    private struct Hold {
        var takePending: Bool
        /// Until the node that held the device hands over; fires if it never does.
        var handover: LoopTimer?
    }

    private func handoverDone(_ deviceID: String) {
        holds[ExactName(deviceID)]?.handover?.cancel()
        holds[ExactName(deviceID)]?.handover = nil
        releaseHold(deviceID)
    }

    private func releaseHold(_ deviceID: String) {
        guard let hold = holds[ExactName(deviceID)], !hold.takePending, hold.handover == nil else { return }
        holds[ExactName(deviceID)] = nil
        guard let record = logic.devices[ExactName(deviceID)], record.link != nil else { return }
        record.holdsForQueue = false
        logic.pump(record)
        server?.carryOut()
    }

    /// The current connection of a device here ended: what it held goes to its queue in
    /// JetStream, and every node learns it is offline.
    func deviceLeft(_ record: DeviceRecord) {
        let deviceID = record.deviceID
        holds.removeValue(forKey: ExactName(deviceID))?.handover?.cancel()
        forgetTakeRetry(deviceID)
        if let released = logic.release(record) { hand(released, of: deviceID) }
        guard let location = directory.devices[ExactName(deviceID)]?.location, location.node == localNode else { return }
        let change = PresenceChange(deviceID: deviceID, online: false, stamp: location.stamp, user: record.user, tags: record.tags.list)
        directory.apply(change, from: localNode)
        announce(change)
    }

    private func replaceElsewhere(_ deviceID: String) {
        guard let record = logic.replacedElsewhere(deviceID) else { return }
        server?.carryOut()
        metrics.replacedElsewhere.increment()
        logger.debug("device connected to another node; closed here with REPLACED", metadata: ["device": "\(deviceID)"])
        if let released = logic.release(record) {
            hand(released, of: deviceID)
        } else if let node = directory.node(of: deviceID), node != localNode {
            // Nothing to hand over: the new node need not wait for it.
            try? publishSealed(subjects.takes(for: node), TakeNotice(deviceIDs: [deviceID]).encoded())
        }
    }

    /// Merges what this node held for a device into its queue, then tells the node that
    /// holds the device now, if any, to take it.
    private func hand(_ released: QueueRecord, of deviceID: String) {
        queues.submit(.merge(released) { [weak self] written in
            guard let self else { return }
            if written {
                self.notifyHolder(of: deviceID)
            } else {
                self.logger.warning("could not hand a device's queue to JetStream; the device finds its payloads with SYNC",
                                    metadata: ["device": "\(deviceID)", "pushes": "\(released.entries.count)"])
            }
        }, for: deviceID)
    }

    func take(_ deviceID: String) {
        holds[ExactName(deviceID)]?.takePending = true
        takeRetries.removeValue(forKey: ExactName(deviceID))?.cancel()
        queues.submit(.take { [weak self] result in
            guard let self else { return }
            switch result {
            case .taken(let taken):
                if let record = self.logic.devices[ExactName(deviceID)], record.link != nil {
                    self.metrics.queuesTaken.increment()
                    self.logic.absorb(taken, into: record)
                    self.server?.carryOut()
                } else {
                    // Gone again while the queue was read: it goes back for the next connection.
                    self.hand(taken, of: deviceID)
                }
                self.takeRetryDelays[ExactName(deviceID)] = nil
            case .empty:
                self.takeRetryDelays[ExactName(deviceID)] = nil
            case .failed:
                self.retryTake(deviceID)
            }
            self.holds[ExactName(deviceID)]?.takePending = false
            self.releaseHold(deviceID)
        }, for: deviceID)
    }

    /// After a queue was written: the device may have connected somewhere meanwhile.
    func notifyHolder(of deviceID: String) {
        guard let node = directory.node(of: deviceID) else { return wroteUnplacedQueue(of: deviceID) }
        if node == localNode {
            if logic.devices[ExactName(deviceID)]?.link != nil { take(deviceID) }
            return
        }
        try? publishSealed(subjects.takes(for: node), TakeNotice(deviceIDs: [deviceID]).encoded())
    }

    private func takeNoticeArrived(_ message: NATSMessage) {
        guard let opened = opened(message) else { return }
        guard let notice = try? TakeNotice(decoding: opened.message) else { return metrics.malformed.increment() }
        for deviceID in notice.deviceIDs where logic.devices[ExactName(deviceID)]?.link != nil {
            // The old node's handover, if this device waited for it: the take ends the wait.
            holds[ExactName(deviceID)]?.handover?.cancel()
            holds[ExactName(deviceID)]?.handover = nil
            take(deviceID)
        }
    }

    // MARK: stopping

    /// After the gateway's connections closed (their queues handed to JetStream): waits
    /// for the queue writes under way, at most `timeout`, then leaves NATS.
    func finish(timeout: Duration = .seconds(3), then done: @escaping () -> Void) {
        if stopped { return done() }
        finishWaiters.append(done)
        guard finishWaiters.count == 1 else { return }
        let complete = { [weak self] in
            guard let self, !self.stopped else { return }
            self.stop()
            let waiters = self.finishWaiters
            self.finishWaiters = []
            for waiter in waiters { waiter() }
        }
        if queues.isIdle { return complete() }
        queues.onIdle = complete
        _ = loop.schedule(after: timeout) { complete() }
    }

    func stop() {
        guard !stopped else { return }
        stopped = true
        heartbeatTimer?.cancel()
        presenceFlush?.cancel()
        for timer in takeRetries.values { timer.cancel() }
        takeRetries = [:]
        takeRetryDelays = [:]
        outgoing.cancel()
        for awaited in awaitingReplies.values { awaited.timer.cancel() }
        awaitingReplies = [:]
        if !pendingPresence.isEmpty { publishPresence(pendingPresence) }
        for subscription in subscriptions { subscription.cancel() }
        subscriptions = []
        connection.close()
    }
}
