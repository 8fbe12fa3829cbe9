import PushClock
import PushSecurity
import PushSession
import PushWire

/// What a device may have written and not yet acknowledged ([4.14-5]).
struct DeliveryWindow {
    let pushes: Int
    let bytes: Int

    /// Whether a frame of `size` bytes may join what is in flight.
    @inline(__always)
    func admits(_ size: Int, after inFlight: InFlightPushes) -> Bool {
        inFlight.count < pushes && Int(inFlight.byteCount) + size <= bytes
    }
}

/// What the gateway knows of one device: its registration, its link while connected,
/// the pushes written to it and not acknowledged yet, and those waiting for it.
public final class DeviceRecord {
    public let deviceID: String
    // Unsafe annotations (issue 39), measured with callgrind on release builds, the gateway
    // under `bench push --devices 1000 --connections 1 --inflight 256` (22,000 minus 2,000
    // pushes) and `bench fanout --devices 2000` (25 minus 5 fan-outs): a dynamic
    // exclusivity check costs 77 instructions (`swift_beginAccess`), 1.6 % of the gateway's
    // ~4,950-instruction push path (PUSH and its DELIVERY_ACK) and 4 % of its ~1,850 per
    // fan-out delivery. `@exclusivity(unchecked)` is kept on the fields the compiler still
    // checks on that path once they are internal: `queue`, `inFlight` and `holdsForQueue`
    // (checked once each per delivery without it) and `missed` (once per DELIVERY_ACK). The
    // others are internal or only touched on connect, and are checked no more.
    public internal(set) var user: String
    public internal(set) var tags: DeviceTags
    var link: DeviceLink?
    /// Waiting: the device is offline, or its window is full.
    @exclusivity(unchecked) var queue: DeviceQueue
    /// Pushes dropped since the device was last told with MISSED. (After the queue, it
    /// fills the queue's last word: the fields are in the order that packs them.)
    @exclusivity(unchecked) var missed: UInt32 = 0
    /// Written on the current link and awaiting DELIVERY_ACK, in the order written; at most
    /// `GatewaySettings.deliveryWindow`.
    @exclusivity(unchecked) var inFlight = InFlightPushes()
    /// Counted in a MISSED written on the current link that the device may not have read:
    /// it has acknowledged no push written after it. Told again on the next link if this
    /// one closes with pushes unacknowledged, so a device that stopped reading loses no
    /// count ([4.15-4]).
    var missedUnconfirmed: UInt32 = 0
    /// When that MISSED was written, in 1,024 ns units of the monotonic clock, wrapping
    /// every 73 minutes: acknowledging a push written later shows the device read it.
    /// (32 bits with the two counts beside it keep a device's record in its malloc size
    /// class; the comparison is wrong only for a MISSED unconfirmed for over 36 minutes.)
    var missedWrittenAt: UInt32 = 0
    /// In a cluster, from HELLO_OK until the queue the device left on other nodes has
    /// arrived: pushes wait behind it, so the device gets MISSED and its put-back pushes
    /// first ([4.14-8]). (Placed here, it fits in padding: no memory per device.)
    @exclusivity(unchecked) var holdsForQueue = false
    /// When the registration of the current link was issued: with its device id it names
    /// the registration ([7.4-4]), so a revocation can tell whether it is this one.
    public internal(set) var linkIssuedAt: UInt64 = 0

    init(deviceID: String, user: String, tags: [String], queueCapacity: Int) {
        self.deviceID = deviceID
        self.user = user
        self.tags = DeviceTags(tags)
        self.queue = DeviceQueue(capacity: queueCapacity)
    }

    public var isOnline: Bool { link != nil }

    /// `missedWrittenAt`'s clock.
    static func coarseTime(_ nanoseconds: UInt64) -> UInt32 { UInt32(truncatingIfNeeded: nanoseconds >> 10) }
}

/// A device record as a set element, by identity.
struct RecordKey: Hashable {
    let record: DeviceRecord

    init(_ record: DeviceRecord) { self.record = record }

    static func == (lhs: RecordKey, rhs: RecordKey) -> Bool { lhs.record === rhs.record }

    func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(record)) }
}
