import PushSecurity
import PushWire

/// Where the gateway writes to one connected device; implemented over a socket by the
/// server and by a recorder in tests.
public protocol DeviceLink: AnyObject {
    /// Queues an encoded frame; false once the link is closed or was cut off.
    func write(_ frame: [UInt8]) -> Bool
    func send(_ message: Message) -> Bool
    /// GOAWAY REPLACED, then close ([5.5-3]).
    func replaced()
}

public struct GatewaySettings: Sendable {
    /// Pushes queued per offline device ([4.13-5]).
    public var queueCapacity = 100
    /// Pushes written to a device and not yet acknowledged; past this the oldest count as missed.
    public var maxUnacknowledged = 1000

    public init() {}
}

/// What the gateway knows of one device: its registration, its link while connected,
/// and the pushes it has not acknowledged yet.
public final class DeviceRecord {
    public let deviceID: String
    // Loop-confined like `GatewayLogic`, and touched for every push and DELIVERY_ACK: the
    // dynamic exclusivity checks cost a thread-local lookup each and cannot fire, since no
    // access is held across a call that could reach the same record again.
    @exclusivity(unchecked) public fileprivate(set) var user: String
    @exclusivity(unchecked) public fileprivate(set) var tags: [String]
    @exclusivity(unchecked) public fileprivate(set) var link: DeviceLink?
    @exclusivity(unchecked) public fileprivate(set) var queue: DeviceQueue
    /// Written on a link, awaiting DELIVERY_ACK, by sequence.
    @exclusivity(unchecked) public fileprivate(set) var unacknowledged: [UInt32: QueuedPush] = [:]
    /// Pushes dropped since the device was last told with MISSED.
    @exclusivity(unchecked) public fileprivate(set) var missed: UInt32 = 0

    init(deviceID: String, user: String, tags: [String], queueCapacity: Int) {
        self.deviceID = deviceID
        self.user = user
        self.tags = tags
        self.queue = DeviceQueue(capacity: queueCapacity)
    }

    public var isOnline: Bool { link != nil }
}

/// The gateway's routing and delivery (SPEC.md 4.13 to 4.15), without sockets.
/// Loop-confined.
public final class GatewayLogic {
    public let settings: GatewaySettings
    public let metrics: GatewayMetrics
    private let registrationSigner: CredentialSigner
    private let wallClock: () -> UInt64
    private let monotonicClock: () -> Int64
    // Read for every push; unchecked for the reason given at `DeviceRecord`.
    @exclusivity(unchecked) public private(set) var devices: [String: DeviceRecord] = [:]
    @exclusivity(unchecked) private var byUser: [String: Set<String>] = [:]
    @exclusivity(unchecked) private var byTag: [String: Set<String>] = [:]
    @exclusivity(unchecked) private var nextSequence: UInt32 = 1

    public init(settings: GatewaySettings, serverKey: SecretKey, metrics: GatewayMetrics,
                wallClock: @escaping () -> UInt64, monotonicClock: @escaping () -> Int64) {
        self.settings = settings
        self.metrics = metrics
        self.registrationSigner = CredentialSigner(serverKey: serverKey, purpose: CredentialSigner.registrationPurpose)
        self.wallClock = wallClock
        self.monotonicClock = monotonicClock
    }

    /// The registration a device presents in HELLO ([7.4-4]).
    public func verifyRegistration(_ credential: [UInt8]?) -> Result<Registration, CredentialError> {
        guard let credential else { return .failure(.malformed) }
        do {
            return .success(try Registration.open(credential, signer: registrationSigner, nowMs: wallClock()))
        } catch {
            return .failure(error)
        }
    }

    // MARK: devices

    /// A device came online; an older connection with its id is replaced ([5.5-3]).
    public func connect(_ registration: Registration, link: DeviceLink) -> DeviceRecord {
        let record: DeviceRecord
        if let known = devices[registration.deviceID] {
            record = known
            unindex(record)
            record.user = registration.user
            record.tags = registration.tags
            if let old = record.link {
                record.link = nil
                metrics.devicesOnline.decrement()
                old.replaced()
            }
        } else {
            record = DeviceRecord(deviceID: registration.deviceID, user: registration.user, tags: registration.tags,
                                  queueCapacity: settings.queueCapacity)
            devices[registration.deviceID] = record
        }
        index(record)
        record.link = link
        metrics.devicesOnline.increment()
        return record
    }

    /// After HELLO_OK: MISSED if pushes were dropped ([4.15-1]), then every unacknowledged
    /// push again ([4.14-3]), then the queue, higher priority first ([4.13-5]).
    public func deliverBacklog(_ record: DeviceRecord) {
        guard let link = record.link else { return }
        let now = monotonicClock()
        var backlog = record.unacknowledged.values.sorted { $0.sequence < $1.sequence }
        backlog += record.queue.drainForDelivery()
        record.unacknowledged = [:]
        let expired = backlog.filter { $0.expiresAtMs <= now }.count
        if expired > 0 {
            record.missed &+= UInt32(expired)
            metrics.pushesExpired.increment(by: Int64(expired))
        }
        if record.missed > 0 {
            guard link.send(.missed(Missed(missedCount: record.missed))) else { return }
            record.missed = 0
        }
        for push in backlog where push.expiresAtMs > now {
            deliver(push, to: record, link: link)
        }
    }

    /// The device's connection closed; what it did not acknowledge waits for the next one.
    public func disconnect(_ record: DeviceRecord, link: DeviceLink) {
        guard record.link === link else { return }
        record.link = nil
        metrics.devicesOnline.decrement()
    }

    public func deliveryAcknowledged(_ record: DeviceRecord, correlation: UInt32) {
        if record.unacknowledged.removeValue(forKey: correlation) != nil {
            metrics.pushesAcknowledged.increment()
        }
    }

    // MARK: pushes

    /// A provider's PUSH: encoded once for devices, written to every connected target and
    /// queued for the others ([4.13-3], [4.13-4]). `push.target` must be set.
    public func push(_ push: Push) -> PushAck {
        metrics.pushesAccepted.increment()
        guard let target = push.target else { return PushAck(written: 0, queued: 0) }
        let sequence = nextSequence
        nextSequence = nextSequence == UInt32.max ? 1 : nextSequence + 1
        let queued = QueuedPush(sequence: sequence, frame: push.deviceFrame(correlation: sequence),
                                priority: push.priority, collapseKey: push.collapseKey,
                                expiresAtMs: monotonicClock() + Int64(push.ttlSeconds) * 1000)
        var written: UInt32 = 0
        var queuedCount: UInt32 = 0
        forEachTarget(target) { record in
            if let link = record.link, deliver(queued, to: record, link: link) {
                written += 1
            } else if push.ttlSeconds > 0 {
                enqueue(queued, for: record)
                queuedCount += 1
            }
        }
        return PushAck(written: written, queued: queuedCount)
    }

    @discardableResult
    private func deliver(_ push: QueuedPush, to record: DeviceRecord, link: DeviceLink) -> Bool {
        guard link.write(push.frame) else { return false }
        metrics.pushesWritten.increment()
        record.unacknowledged[push.sequence] = push
        if record.unacknowledged.count > settings.maxUnacknowledged,
           let oldest = record.unacknowledged.keys.min(by: { sequenceOrder($0, $1) }) {
            record.unacknowledged[oldest] = nil
            record.missed &+= 1
            metrics.pushesDropped.increment()
        }
        return true
    }

    private func enqueue(_ push: QueuedPush, for record: DeviceRecord) {
        let now = monotonicClock()
        let expired = record.queue.dropExpired(nowMs: now)
        if expired > 0 {
            record.missed &+= UInt32(expired)
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

    private func forEachTarget(_ target: PushTarget, _ body: (DeviceRecord) -> Void) {
        switch target {
        case .device(let id):
            if let record = devices[id] { body(record) }
        case .user(let user):
            for id in byUser[user] ?? [] { if let record = devices[id] { body(record) } }
        case .tag(let tag):
            for id in byTag[tag] ?? [] { if let record = devices[id] { body(record) } }
        }
    }

    private func index(_ record: DeviceRecord) {
        byUser[record.user, default: []].insert(record.deviceID)
        for tag in record.tags { byTag[tag, default: []].insert(record.deviceID) }
    }

    private func unindex(_ record: DeviceRecord) {
        byUser[record.user]?.remove(record.deviceID)
        if byUser[record.user]?.isEmpty == true { byUser[record.user] = nil }
        for tag in record.tags {
            byTag[tag]?.remove(record.deviceID)
            if byTag[tag]?.isEmpty == true { byTag[tag] = nil }
        }
    }
}

/// Sequence numbers wrap; the older of two is the one further behind modulo 2^32.
func sequenceOrder(_ lhs: UInt32, _ rhs: UInt32) -> Bool {
    Int32(bitPattern: lhs &- rhs) < 0
}
