import PushClock
import PushSecurity
import PushSession
import PushWire

/// The gateway's routing and delivery (SPEC.md 4.13 to 4.15), without sockets: each call
/// changes the state and appends what is to be written or closed to `actions`, which the
/// driver carries out (`carryOut`) before its next call. The logic reads how much a
/// link's output holds (`DeviceLink.outputRoom`) and judges each write as the connection
/// will: a frame that may wait and does not fit waits in the queue, one that may not wait
/// cuts the device off as a slow consumer. Loop-confined.
public final class GatewayLogic {
    public let settings: GatewaySettings
    public let metrics: GatewayMetrics
    let registrationSigner: CredentialSigner
    let wallClock: () -> UInt64
    private let monotonicClock: () -> Int64
    func monotonicNow() -> Int64 { monotonicClock() }
    /// The devices the gateway holds a record for: every device that connected since the
    /// start and, with a registry, every enrolled device a push was queued for.
    /// Keyed by the device id's exact bytes ([3.3-8]), as are the user and tag indexes: two
    /// ids that differ only in Unicode normalization are two devices.
    // Unchecked (see `DeviceRecord` for the measurement): read once per push; public for the
    // tests' in-process services, so the compiler checks every access.
    @exclusivity(unchecked) public internal(set) var devices: [ExactName: DeviceRecord] = [:]
    /// The store's device registry, when the gateway follows one (`--store`): then a device
    /// must be enrolled there to connect, and targets match enrolled devices, connected or
    /// not ([4.13-7]). Without it, the registration alone admits a device and targets
    /// match the devices that connected since the start (SPEC 1.1).
    // Unchecked: tested once per push (`forEachTarget`), 77 instructions, 1.6 % of the path.
    @exclusivity(unchecked) var registry: DeviceRegistry?
    /// The registry's metrics, when there is a registry.
    public let registryMetrics: RegistryMetrics?
    /// Without a registry: the records of each user and each tag. Records by identity
    /// (8 bytes an entry, not a 16-byte device id), which also spares a lookup in
    /// `devices` per target; a record stays in `devices` for good without a registry.
    private var byUser: [ExactName: Set<RecordKey>] = [:]
    private var byTag: [ExactName: Set<RecordKey>] = [:]
    private var nextSequence: UInt32 = 1
    /// Which loop of the gateway this logic serves, when it has several: its registry keeps
    /// only the devices whose home this loop is.
    var placement: LoopPlacement? {
        didSet { registry?.placement = placement }
    }
    /// On a cluster node: where the devices not connected here are, and whether NATS can be
    /// reached. The route sends their share to their node or to their queue in JetStream
    /// (`routeOnNode`).
    var clusterView: ClusterView?
    /// Called once, when the registry is first loaded.
    var registryLoaded: (() -> Void)?
    /// Decided and not carried out yet, in order; `carryOut` empties it and keeps its
    /// capacity, so the hot path allocates no buffer per push.
    // Unchecked: `actions` and `carrying` are swapped once per push and `actions` is read by
    // the server's `carryOut` several times: without it 2 to 3 checks per push (150 to 230
    // instructions, 3 to 5 % of the push path; see `DeviceRecord`).
    @exclusivity(unchecked) var actions: [GatewayAction] = []
    /// Called while a decision is still being made (a fan-out) each time it has gathered
    /// `actionBatch` actions, so that the driver may carry them out before it ends and the
    /// first devices get their frames while the last are decided. The driver must not call
    /// into the logic from it: what it learns meanwhile waits for its `carryOut` after the
    /// decision.
    public var actionsGathered: (() -> Void)?
    /// As many as the event loop stages small writes for in one turn.
    static let actionBatch = 128
    /// The buffer `carryOut` walks while new actions go to `actions`.
    @exclusivity(unchecked) private var carrying: [GatewayAction] = []
    /// Where a MISSED is encoded to learn its size.
    private var missedScratch: [UInt8] = []
    /// The PUSHes with `once` 1 whose share this loop delivered, by id ([4.13-12]).
    var once: OnceMemory
    /// The devices whose output was last seen holding bytes their side had not taken
    /// ([5.5-7]): only those, so that a device costs no memory for the rule.
    var stalls: [RecordKey: OutputStall] = [:]

    /// - Parameter followsRegistry: whether devices must be enrolled in the store's
    ///   registry, which `applyRegistry` then feeds.
    public init(settings: GatewaySettings, serverKey: SecretKey, metrics: GatewayMetrics, followsRegistry: Bool = false,
                wallClock: @escaping () -> UInt64, monotonicClock: @escaping () -> Int64) {
        self.settings = settings
        self.metrics = metrics
        self.registrationSigner = CredentialSigner(serverKey: serverKey, purpose: CredentialSigner.registrationPurpose)
        self.wallClock = wallClock
        self.monotonicClock = monotonicClock
        once = OnceMemory(capacity: settings.onceMemory)
        registry = followsRegistry ? DeviceRegistry(serverKey: serverKey) : nil
        registryMetrics = followsRegistry ? RegistryMetrics(registry: metrics.registry) : nil
    }

    /// Hands every action decided so far to `perform`, in order, then forgets them. Actions
    /// decided meanwhile (by calls `perform` makes) are handed over after. Must run after
    /// each call that decides actions and before the next: the logic judges a link's room
    /// from its output as it is, so the frames it decided must be in it.
    func carryOut(_ perform: (consuming GatewayAction) -> Void) {
        while !actions.isEmpty {
            swap(&actions, &carrying)
            // Each action is moved out and its slot refilled with one that holds no
            // reference: copying them out cost a fan-out a retain and a release per device
            // and action (about 6 % of the gateway's CPU per delivery).
            carrying.withUnsafeMutableBufferPointer { buffer in
                for index in buffer.indices {
                    let action = buffer.moveElement(from: index)
                    buffer.initializeElement(at: index, to: .forward(to: .loop(0)))
                    perform(action)
                }
            }
            carrying.removeAll(keepingCapacity: true)
        }
    }

    // MARK: devices

    /// A device came online; an older connection with its id is replaced ([5.5-3]), and
    /// what was written on it and not acknowledged waits for the new one.
    public func connect(_ registration: Registration, link: DeviceLink) -> DeviceRecord {
        let record: DeviceRecord
        let deviceID = ExactName(registration.deviceID)
        if let known = devices[deviceID] {
            record = known
            if registry == nil { unindex(record) }
            record.user = registration.user
            record.tags = DeviceTags(registration.tags)
            if let old = record.link {
                record.link = nil
                metrics.devicesOnline.decrement()
                takeBackInFlight(record)
                actions.append(.replaced(old))
            }
        } else {
            record = DeviceRecord(deviceID: registration.deviceID, user: registration.user, tags: registration.tags,
                                  queueCapacity: settings.queueCapacity)
            devices[deviceID] = record
        }
        if registry == nil { index(record) }
        record.link = link
        record.linkIssuedAt = registration.issuedAt
        metrics.devicesOnline.increment()
        return record
    }

    /// After HELLO_OK: MISSED if pushes were dropped ([4.15-1]), then the queue, which
    /// starts with every push not acknowledged on an earlier connection ([4.14-3]) and
    /// goes on higher priority first ([4.13-5]), paced by the delivery window.
    public func deliverBacklog(_ record: DeviceRecord) {
        pump(record)
    }

    /// The device's connection closed, for whatever reason (the device left, was cut off,
    /// timed out, was replaced, or failed to take an action): what it did not acknowledge
    /// goes back to the front of its queue, or counts into MISSED if the queue overflows,
    /// and waits for the next one. Returns whether `link` was the device's current one
    /// (not one it replaced, or one the logic had already let go).
    @discardableResult
    public func disconnect(_ record: DeviceRecord, link: DeviceLink) -> Bool {
        guard record.link === link else { return false }
        detach(record)
        return true
    }

    /// Lets the device's current link go.
    func detach(_ record: DeviceRecord) {
        record.link = nil
        if !stalls.isEmpty { stalls[RecordKey(record)] = nil }
        metrics.devicesOnline.decrement()
        takeBackInFlight(record)
        // A device revoked while it was connected keeps no queue.
        if registry != nil { settle(ExactName(record.deviceID)) }
    }

    /// What writing a frame of `size` bytes to a link would do, judged as the connection
    /// judges it (`ServiceHost.sendEncoded`): a frame the gateway starts that passes the
    /// output cap cuts the peer off, unless it may wait (`mayWait`: something is in flight,
    /// so an acknowledgement will come and free room).
    enum LinkWrite {
        case written
        /// Not written: it waits in the queue.
        case full
        /// Not written: the link takes no writes.
        case closed
        /// Not written: the link is to be cut off.
        case cutsOff
    }

    @inline(__always)
    func judge(_ size: Int, room: Int?, mayWait: Bool) -> LinkWrite {
        guard let room else { return .closed }
        if size <= room { return .written }
        return mayWait ? .full : .cutsOff
    }

    /// Cuts the device's link off as a slow consumer (see `judge`).
    private func cutOff(_ record: DeviceRecord, link: DeviceLink) {
        actions.append(.cutOff(link))
        detach(record)
    }

    /// DELIVERY_ACK: it must name the PUSH written with that correlation id and carry that
    /// push's id ([4.14-2]); any other is ignored and counted. An acknowledgement frees a
    /// slot of the window for the next queued push.
    public func deliveryAcknowledged(_ record: DeviceRecord, correlation: UInt32, id: [UInt8]) {
        id.withUnsafeBytes { deliveryAcknowledged(record, correlation: correlation, id: $0) }
    }

    /// `deliveryAcknowledged` with the id read in place from the frame.
    public func deliveryAcknowledged(_ record: DeviceRecord, correlation: UInt32, id: UnsafeRawBufferPointer) {
        switch record.inFlight.acknowledge(correlation, id: id) {
        case .unknown:
            metrics.deliveryAcksUnknown.increment()
        case .mismatched:
            metrics.deliveryAcksMismatched.increment()
        case .acknowledged(let writtenAtNs):
            if record.missedUnconfirmed > 0, Int32(bitPattern: DeviceRecord.coarseTime(writtenAtNs) &- record.missedWrittenAt) > 0 {
                record.missedUnconfirmed = 0
            }
            metrics.deliveryDuration.observe(since: writtenAtNs)
            metrics.pushesAcknowledged.increment()
            if !record.queue.isEmpty || record.missed > 0 { pump(record) }
        }
    }

    // MARK: pushes

    /// A provider's PUSH: encoded once for devices, written to every connected target
    /// with room in its window and queued for the others ([4.13-3], [4.13-4]): `written`
    /// counts the devices it went to on a live connection now, `queued` those holding it
    /// for later (offline, or behind their window). `push.target` must be set. What this
    /// loop does not deliver itself goes elsewhere as `.forward` actions: on a gateway of
    /// several loops, to the loops that may hold other targets (a device's home loop alone,
    /// or every other loop for a user or a tag), which get the `Push` itself, `user` and
    /// `once` with it, so that each restricts its share to the user ([4.13-11]) and
    /// remembers it ([4.13-12]); on a cluster node, to other nodes and to JetStream (`route`).
    public func push(_ push: Push) -> PushAck {
        metrics.pushesAccepted.increment()
        guard let placement, placement.count > 1, let target = push.target else { return route(push) }
        if case .device(let deviceID) = target {
            let home = placement.home(of: deviceID)
            guard home == placement.index else {
                actions.append(.forward(to: .loop(home)))
                return PushAck(written: 0, queued: 0)
            }
            return route(push)
        }
        let ack = route(push)
        for index in 0..<placement.count where index != placement.index { actions.append(.forward(to: .loop(index))) }
        return ack
    }

    /// `push` without counting it as accepted or sending it to other loops: this loop's
    /// share of a PUSH, when this loop or another accepted it. The one route of the
    /// gateway: a cluster node's share (`routeOnNode`) differs only in where the devices
    /// not connected here go and in remembering `once` per device.
    func route(_ push: Push) -> PushAck {
        guard let target = push.target else { return PushAck(written: 0, queued: 0) }
        if let clusterView { return routeOnNode(push, to: target, cluster: clusterView) }
        // An ordinary push (once 0, no user) pays two tests for revision 1.3 and goes on
        // as before it: the restricted path is a function of its own.
        if push.once || push.user != nil { return routeRestricted(push, to: target) }
        let queued = queuedPush(push)
        let connectedOnly = queued.connectedOnly
        let window = settings.window
        // Counted in two locals rather than a `ShareCount`: the closure would then be the
        // restricted path's, which the optimizer merges into one that copies the
        // `QueuedPush` per device (about 100 instructions a push under callgrind).
        var written: UInt32 = 0
        var queuedCount: UInt32 = 0
        forEachTarget(target, connectedOnly: connectedOnly) { record in
            switch deliver(queued, to: record, window: window) {
            case .written: written += 1
            case .queued: queuedCount += 1
            case .dropped: break
            }
        }
        return PushAck(written: written, queued: queuedCount)
    }

    /// This loop's share of a PUSH with `user` or `once` 1. With `user`, only that user's
    /// devices among those its target matches ([4.13-11]). With `once` 1 ([4.13-12]): answered
    /// from memory, and neither written nor queued, when its id was delivered here within
    /// the window; otherwise delivered, and its counts remembered.
    @inline(never)
    private func routeRestricted(_ push: Push, to target: PushTarget) -> PushAck {
        var now: Int64 = 0
        if push.once {
            now = monotonicClock()
            if let remembered = once.entry(push.id, nowMs: now) {
                metrics.pushesRepeated.increment()
                metrics.onceRemembered.set(once.count)
                return remembered.ack
            }
        }
        let queued = queuedPush(push)
        let connectedOnly = queued.connectedOnly
        let window = settings.window
        var count = ShareCount()
        if let user = push.user {
            forEachTarget(target, ofUser: user, connectedOnly: connectedOnly) { count.add(deliver(queued, to: $0, window: window)) }
        } else {
            forEachTarget(target, connectedOnly: connectedOnly) { count.add(deliver(queued, to: $0, window: window)) }
        }
        let ack = count.ack
        if push.once {
            once.remember(push.id, ack: ack, nowMs: now)
            metrics.onceRemembered.set(once.count)
        }
        return ack
    }

    /// A provider's PUSH as this loop delivers and queues it: the next sequence number, the
    /// frame devices get (encoded once for every target), its TTL on the monotonic clock.
    /// One clock reading for the whole fan-out: the writes follow at once. A push queued
    /// instead gets its own time when `pump` writes it.
    func queuedPush(_ push: Push) -> QueuedPush {
        let sequence = takeSequence()
        let connectedOnly = push.ttlSeconds == 0
        return QueuedPush(sequence: sequence, frame: push.deviceFrame(correlation: sequence),
                          priority: push.priority, collapseKey: push.collapseKey,
                          expiresAtMs: connectedOnly ? .max : monotonicClock() + Int64(settings.ttlSeconds(of: push)) * 1000,
                          connectedOnly: connectedOnly, once: push.once, writtenAtNs: Clocks.monotonicNanoseconds())
    }

    /// The next push sequence number, which is also the correlation id of its frames.
    @inline(__always)
    func takeSequence() -> UInt32 {
        let sequence = nextSequence
        nextSequence = nextSequence == UInt32.max ? 1 : nextSequence + 1
        return sequence
    }

    /// What became of a push for one device.
    enum Delivery {
        case written
        case queued
        /// For connected devices only, and the device is not.
        case dropped
    }

    /// The counts of this loop's share of a push, as its deliveries are decided.
    struct ShareCount {
        var written: UInt32 = 0
        var queued: UInt32 = 0
        /// Whether a device was answered from the once-memory ([4.13-12]).
        var repeated = false

        @inline(__always)
        mutating func add(_ delivery: Delivery) {
            switch delivery {
            case .written: written += 1
            case .queued: queued += 1
            case .dropped: break
            }
        }

        var ack: PushAck { PushAck(written: written, queued: queued) }
    }

    /// Writes a push to a device, or queues it: straight out when nothing waits ahead of
    /// it and the window has room; behind the window or the pushes already waiting when
    /// the device is connected; kept for its next connection when it is not, unless the
    /// push is for connected devices only.
    @inline(__always)
    func deliver(_ queued: QueuedPush, to record: DeviceRecord, window: DeliveryWindow) -> Delivery {
        var linkClosed = false
        if let link = record.link {
            if record.queue.isEmpty, window.admits(queued.frame.count, after: record.inFlight), !record.holdsForQueue {
                switch judge(queued.frame.count, room: link.outputRoom, mayWait: !record.inFlight.isEmpty) {
                case .written:
                    actions.append(.push(link, frame: queued.frame))
                    record.inFlight.append(queued)
                    metrics.pushesWritten.increment()
                    if actions.count >= GatewayLogic.actionBatch, let actionsGathered { actionsGathered() }
                    return .written
                case .full:
                    break
                case .closed:
                    linkClosed = true
                case .cutsOff:
                    cutOff(record, link: link)
                    linkClosed = true
                }
            }
            if !linkClosed, record.link === link {
                // It goes out as acknowledgements come in.
                enqueue(queued, for: record)
                // What the queue dropped for it is reported now, not at the next
                // acknowledgement, which a device that reads and never acknowledges
                // would not send ([4.15-1]).
                if record.missed > 0 { reportMissed(record) }
                return .queued
            }
        }
        // Offline (or its connection just went away).
        guard !queued.connectedOnly else { return .dropped }
        enqueue(queued, for: record)
        return .queued
    }

    /// MISSED if anything was dropped, then queued pushes while the window and the link's
    /// output have room.
    func pump(_ record: DeviceRecord) {
        guard let link = record.link, !record.holdsForQueue else { return }
        if record.queue.mayExpire {
            let expired = record.queue.dropExpired(nowMs: monotonicClock())
            if expired > 0 {
                record.missed &+= UInt32(truncatingIfNeeded: expired)
                metrics.pushesExpired.increment(by: Int64(expired))
            }
        }
        // The room left once the frames decided here are in the output.
        guard var room = link.outputRoom else { return }
        // A MISSED the device may not have read yet holds the count for the next one, which
        // the acknowledgement of a push written after it brings ([4.15-5]).
        if record.missed > 0, record.missedUnconfirmed == 0 {
            switch writeMissed(record, link: link, room: room) {
            case .written(let size): room -= size
            case .full, .closed: return
            }
        }
        let window = settings.window
        var writtenAtNs: UInt64 = 0
        while var next = record.queue.first, window.admits(next.frame.count, after: record.inFlight) {
            switch judge(next.frame.count, room: room, mayWait: !record.inFlight.isEmpty) {
            case .written: break
            case .full, .closed: return
            case .cutsOff:
                // Nothing in flight, and the queue keeps the push: it waits for the next link.
                cutOff(record, link: link)
                return
            }
            room -= next.frame.count
            actions.append(.push(link, frame: next.frame))
            record.queue.removeFirst()
            if writtenAtNs == 0 {
                writtenAtNs = Clocks.monotonicNanoseconds()
                // After a MISSED written just now in the same microsecond: later, as written,
                // so that its acknowledgement confirms the MISSED ([4.15-4]).
                if record.missedUnconfirmed > 0, DeviceRecord.coarseTime(writtenAtNs) == record.missedWrittenAt { writtenAtNs += 1024 }
            }
            next.writtenAtNs = writtenAtNs
            record.inFlight.append(next)
            metrics.pushesWritten.increment()
        }
    }

    /// MISSED to a connected device whose queue dropped pushes just now, unless its MISSED
    /// is to come first after HELLO_OK ([4.14-8]), is waiting for room already, or one
    /// written before may not have been read: then the count waits for it to be ([4.15-5]),
    /// so a device that reads nothing gets one MISSED frame, not one per push dropped.
    private func reportMissed(_ record: DeviceRecord) {
        guard record.missedUnconfirmed == 0, let link = record.link, !record.holdsForQueue, let room = link.outputRoom else { return }
        _ = writeMissed(record, link: link, room: room)
    }

    enum MissedWrite {
        case written(size: Int)
        /// It waits for the next acknowledgement, which frees room (`pump`).
        case full
        /// Not written: the link takes no writes or was cut off.
        case closed
    }

    /// MISSED with every push dropped since the device was last told ([4.15-1]). Like a
    /// push it waits while pushes are in flight and the output has no room for it; with
    /// nothing in flight, no room means the device has stopped reading ([5.5-4]).
    private func writeMissed(_ record: DeviceRecord, link: DeviceLink, room: Int) -> MissedWrite {
        let missed = Missed(missedCount: record.missed)
        missedScratch.removeAll(keepingCapacity: true)
        Message.missed(missed).encode(correlation: 0, into: &missedScratch)
        switch judge(missedScratch.count, room: room, mayWait: !record.inFlight.isEmpty) {
        case .written:
            actions.append(.missed(link, missed))
            record.missedUnconfirmed &+= record.missed
            record.missedWrittenAt = DeviceRecord.coarseTime(Clocks.monotonicNanoseconds())
            record.missed = 0
            return .written(size: missedScratch.count)
        case .full:
            return .full
        case .closed:
            return .closed
        case .cutsOff:
            cutOff(record, link: link)
            return .closed
        }
    }

    /// The link is gone: connected-only pushes are dropped, the rest of what was in
    /// flight goes back to the front of the queue; all that is dropped counts into MISSED.
    func takeBackInFlight(_ record: DeviceRecord) {
        // A device that left pushes unacknowledged may not have read that MISSED either;
        // one that acknowledged everything before it and closed is taken to have ([4.15-4]).
        if !record.inFlight.isEmpty { record.missed &+= record.missedUnconfirmed }
        record.missedUnconfirmed = 0
        let connectedOnly = record.queue.dropConnectedOnly()
        if connectedOnly > 0 {
            record.missed &+= UInt32(truncatingIfNeeded: connectedOnly)
            metrics.pushesExpired.increment(by: Int64(connectedOnly))
        }
        guard !record.inFlight.isEmpty else { return }
        var returned = record.inFlight.removeAll()
        if returned.contains(where: \.connectedOnly) {
            let before = returned.count
            returned.removeAll { $0.connectedOnly }
            record.missed &+= UInt32(truncatingIfNeeded: before - returned.count)
            metrics.pushesExpired.increment(by: Int64(before - returned.count))
        }
        let dropped = record.queue.returnToFront(returned)
        metrics.pushesRequeued.increment(by: Int64(returned.count))
        if dropped > 0 {
            record.missed &+= UInt32(truncatingIfNeeded: dropped)
            metrics.pushesDropped.increment(by: Int64(dropped))
        }
    }

    func enqueue(_ push: QueuedPush, for record: DeviceRecord) {
        // Nothing queued can expire (connected-only pushes waiting behind the window, say):
        // no need to read the clock, since the time is used only to drop expired pushes.
        let now = record.queue.mayExpire ? monotonicClock() : 0
        let expired = record.queue.dropExpired(nowMs: now)
        if expired > 0 {
            record.missed &+= UInt32(truncatingIfNeeded: expired)
            metrics.pushesExpired.increment(by: Int64(expired))
        }
        switch record.queue.enqueue(push, nowMs: now) {
        case .queued:
            metrics.pushesQueued.increment()
        case .collapsed:
            metrics.pushesQueued.increment()
            metrics.pushesCollapsed.increment()
        case .queuedDroppingOldest:
            metrics.pushesQueued.increment()
            metrics.pushesDropped.increment()
            record.missed &+= 1
        }
    }

    /// The devices a target matches: with a registry, every enrolled device (a record is made
    /// for one that has none yet, unless the push is for connected devices only, which an
    /// offline device without a record cannot be); without, the devices seen since the start.
    private func forEachTarget(_ target: PushTarget, connectedOnly: Bool, _ body: (DeviceRecord) -> Void) {
        // Tested first without binding: `if let registry` copies the registry (a struct of
        // several collections) and retains its storage for every push.
        if registry == nil {
            switch target {
            case .device(let id):
                if let record = devices[ExactName(id)] { body(record) }
            case .user(let user):
                for key in byUser[ExactName(user)] ?? [] { body(key.record) }
            case .tag(let tag):
                for key in byTag[ExactName(tag)] ?? [] { body(key.record) }
            }
            return
        }
        if let registry {
            registry.forEachDevice(matching: target, nowMs: wallClock()) { enrolled in
                if let record = devices[ExactName(enrolled.deviceID)] {
                    body(record)
                } else if !connectedOnly {
                    body(makeRecord(enrolled.registration))
                }
            }
        }
    }

    /// `forEachTarget` for a PUSH with `user`: only the devices whose registration names
    /// that user ([4.13-11]), the enrolled one with a registry, the one of the latest HELLO
    /// without. Apart from the ordinary path, which it leaves as it was.
    private func forEachTarget(_ target: PushTarget, ofUser user: String, connectedOnly: Bool, _ body: (DeviceRecord) -> Void) {
        guard let registry else {
            // Another user's target holds none of this user's devices.
            if case .user(let name) = target, !name.isExactly(user) { return }
            forEachTarget(target, connectedOnly: connectedOnly) { record in
                if record.user.isExactly(user) { body(record) }
            }
            return
        }
        registry.forEachDevice(matching: target, nowMs: wallClock()) { enrolled in
            guard enrolled.registration.user.isExactly(user) else { return }
            if let record = devices[ExactName(enrolled.deviceID)] {
                body(record)
            } else if !connectedOnly {
                body(makeRecord(enrolled.registration))
            }
        }
    }

    /// The record of an enrolled device a push is queued for before it ever connected.
    private func makeRecord(_ registration: Registration) -> DeviceRecord {
        let record = DeviceRecord(deviceID: registration.deviceID, user: registration.user, tags: registration.tags,
                                  queueCapacity: settings.queueCapacity)
        devices[ExactName(registration.deviceID)] = record
        return record
    }

    private func index(_ record: DeviceRecord) {
        byUser[ExactName(record.user), default: []].insert(RecordKey(record))
        for tag in record.tags { byTag[ExactName(tag), default: []].insert(RecordKey(record)) }
    }

    private func unindex(_ record: DeviceRecord) {
        let user = ExactName(record.user)
        byUser[user]?.remove(RecordKey(record))
        if byUser[user]?.isEmpty == true { byUser[user] = nil }
        for name in record.tags {
            let tag = ExactName(name)
            byTag[tag]?.remove(RecordKey(record))
            if byTag[tag]?.isEmpty == true { byTag[tag] = nil }
        }
    }
}

/// Sequence numbers wrap; the older of two is the one further behind modulo 2^32.
func sequenceOrder(_ lhs: UInt32, _ rhs: UInt32) -> Bool {
    Int32(bitPattern: lhs &- rhs) < 0
}
