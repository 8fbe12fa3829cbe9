import PushWire

/// What one node tells the others, in the layout of `ClusterWriter`. Every message starts
/// with `ClusterMessages.version`.
enum ClusterMessages {
    static let version: UInt8 = 1
}

/// Sent by every node each `ClusterSettings.heartbeatInterval`: it is alive, under which
/// boot, and whether it needs everyone's presence (it just started or reconnected to NATS,
/// and so may have missed changes).
struct NodeHeartbeat: Equatable {
    var node: String
    /// Random per process start: a node restarted under the same name holds none of the
    /// devices its last run held.
    var boot: UInt64
    var devices: Int
    var wantsPresence: Bool

    func encoded() -> [UInt8] {
        var writer = ClusterWriter(version: ClusterMessages.version)
        writer.string(node)
        writer.integer(boot)
        writer.integer(devices)
        writer.integer(wantsPresence ? UInt8(1) : 0)
        return writer.bytes
    }

    init(node: String, boot: UInt64, devices: Int, wantsPresence: Bool) {
        self.node = node
        self.boot = boot
        self.devices = devices
        self.wantsPresence = wantsPresence
    }

    init(decoding bytes: [UInt8]) throws(ClusterDecodeError) {
        var reader = try ClusterReader(bytes, version: ClusterMessages.version)
        node = try reader.string()
        boot = try reader.integer()
        devices = Int(clamping: try reader.integer())
        wantsPresence = try reader.uint8() != 0
    }
}

/// A device connected to or left a node. `stamp` orders connections of one device
/// across nodes: the later one stands and the earlier is replaced ([5.5-3]).
struct PresenceChange: Equatable {
    var deviceID: String
    var online: Bool
    var stamp: UInt64
    var user: String
    var tags: [String]
}

/// Presence changes of one node, in the order they happened there.
struct PresenceBatch: Equatable {
    var node: String
    var boot: UInt64
    var changes: [PresenceChange]

    func encoded() -> [UInt8] {
        var writer = ClusterWriter(version: ClusterMessages.version, reserving: 32 + changes.count * 48)
        writer.string(node)
        writer.integer(boot)
        writer.integer(changes.count)
        for change in changes {
            writer.string(change.deviceID)
            writer.integer(change.online ? UInt8(1) : 0)
            writer.integer(change.stamp)
            writer.string(change.user)
            writer.strings(change.tags)
        }
        return writer.bytes
    }

    init(node: String, boot: UInt64, changes: [PresenceChange]) {
        self.node = node
        self.boot = boot
        self.changes = changes
    }

    init(decoding bytes: [UInt8]) throws(ClusterDecodeError) {
        var reader = try ClusterReader(bytes, version: ClusterMessages.version)
        node = try reader.string()
        boot = try reader.integer()
        let count = try reader.count()
        changes = []
        changes.reserveCapacity(count)
        for _ in 0..<count {
            let deviceID = try reader.string()
            let online = try reader.uint8() != 0
            let stamp = try reader.integer()
            let user = try reader.string()
            let tags = try reader.strings()
            changes.append(PresenceChange(deviceID: deviceID, online: online, stamp: stamp, user: user, tags: tags))
        }
    }
}

/// The parts of a PUSH a device gets, as they travel between nodes and sit in queues:
/// the body of the device's PUSH frame (the correlation id is each node's own), with the
/// fields queueing needs beside it.
struct ClusterPush: Equatable {
    var frameBody: [UInt8]
    var priority: UInt8
    var collapseKey: String?
    /// Wall-clock milliseconds; 0 for a push to connected devices only (ttl_s 0).
    var expiresAtWallMs: UInt64

    var connectedOnly: Bool { expiresAtWallMs == 0 }

    init(frameBody: [UInt8], priority: UInt8, collapseKey: String?, expiresAtWallMs: UInt64) {
        self.frameBody = frameBody
        self.priority = priority
        self.collapseKey = collapseKey
        self.expiresAtWallMs = expiresAtWallMs
    }

    /// From an encoded device frame (`Push.deviceFrame`).
    init(deviceFrame: [UInt8], priority: UInt8, collapseKey: String?, expiresAtWallMs: UInt64) {
        self.init(frameBody: Array(deviceFrame.dropFirst(FrameHeader.size)), priority: priority,
                  collapseKey: collapseKey, expiresAtWallMs: expiresAtWallMs)
    }

    /// The device's PUSH frame with this node's correlation id.
    func deviceFrame(correlation: UInt32) -> [UInt8] {
        var frame: [UInt8] = []
        frame.reserveCapacity(FrameHeader.size + frameBody.count)
        FrameHeader(type: .push, correlation: correlation, bodyLength: UInt32(frameBody.count)).write(into: &frame)
        frame.append(contentsOf: frameBody)
        return frame
    }

    fileprivate func write(to writer: inout ClusterWriter) {
        writer.data(frameBody)
        writer.integer(priority)
        writer.optionalString(collapseKey)
        writer.integer(expiresAtWallMs)
    }

    fileprivate init(reading reader: inout ClusterReader) throws(ClusterDecodeError) {
        frameBody = Array(try reader.data())
        priority = try reader.uint8()
        collapseKey = try reader.optionalString()
        expiresAtWallMs = try reader.integer()
    }
}

/// A push for devices connected to the node it is sent to.
struct ForwardedPush: Equatable {
    var push: ClusterPush
    var deviceIDs: [String]
}

/// The pushes one node forwards to another in one loop turn, as one NATS request (a
/// burst of unicast pushes costs one message per node, not one per push);
/// `ForwardReplies` answers it.
struct ForwardBatch: Equatable {
    /// Names the batch in the sender's pending list; the reply carries it back.
    var id: UInt64
    var pushes: [ForwardedPush]

    func encoded() -> [UInt8] {
        let size = pushes.reduce(24) { $0 + $1.push.frameBody.count + 24 + $1.deviceIDs.count * 24 }
        var writer = ClusterWriter(version: ClusterMessages.version, reserving: size)
        writer.integer(id)
        writer.integer(pushes.count)
        for forwarded in pushes {
            forwarded.push.write(to: &writer)
            writer.strings(forwarded.deviceIDs)
        }
        return writer.bytes
    }

    init(id: UInt64, pushes: [ForwardedPush]) {
        self.id = id
        self.pushes = pushes
    }

    init(decoding bytes: [UInt8]) throws(ClusterDecodeError) {
        var reader = try ClusterReader(bytes, version: ClusterMessages.version)
        id = try reader.integer()
        let count = try reader.count()
        pushes = []
        pushes.reserveCapacity(count)
        for _ in 0..<count {
            let push = try ClusterPush(reading: &reader)
            pushes.append(ForwardedPush(push: push, deviceIDs: try reader.strings()))
        }
    }
}

/// What a node did with each push of a `ForwardBatch`, in its order: as PUSH_ACK counts ([4.13-3]).
struct ForwardReplies: Equatable {
    struct Counts: Equatable {
        var written: UInt32
        var queued: UInt32
    }

    /// The `ForwardBatch.id` answered.
    var id: UInt64
    var counts: [Counts]

    func encoded() -> [UInt8] {
        var writer = ClusterWriter(version: ClusterMessages.version, reserving: 12 + counts.count * 4)
        writer.integer(id)
        writer.integer(counts.count)
        for count in counts {
            writer.integer(count.written)
            writer.integer(count.queued)
        }
        return writer.bytes
    }

    init(id: UInt64, counts: [Counts]) {
        self.id = id
        self.counts = counts
    }

    init(decoding bytes: [UInt8]) throws(ClusterDecodeError) {
        var reader = try ClusterReader(bytes, version: ClusterMessages.version)
        id = try reader.integer()
        let count = try reader.count()
        counts = []
        counts.reserveCapacity(count)
        for _ in 0..<count { counts.append(Counts(written: try reader.uint32(), queued: try reader.uint32())) }
    }
}

/// "The queues of these devices, which you hold, were written: take them."
struct TakeNotice: Equatable {
    var deviceIDs: [String]

    func encoded() -> [UInt8] {
        var writer = ClusterWriter(version: ClusterMessages.version)
        writer.strings(deviceIDs)
        return writer.bytes
    }

    init(deviceIDs: [String]) { self.deviceIDs = deviceIDs }

    init(decoding bytes: [UInt8]) throws(ClusterDecodeError) {
        var reader = try ClusterReader(bytes, version: ClusterMessages.version)
        deviceIDs = try reader.strings()
    }
}

/// A device's offline queue as JetStream keeps it: one message per device, replaced as a
/// whole under an expected-sequence check, so writers on different nodes never lose each
/// other's pushes.
/// Whose pushes a queue record holds: a user's, for one enrolment of the device.
struct QueueOwner: Equatable {
    var user: String
    var enrolment: UInt64
}

struct QueueRecord: Equatable {
    struct Entry: Equatable {
        var push: ClusterPush
        /// Written on a connection that closed unacknowledged: delivered before the rest ([4.14-3]).
        var returned: Bool
        /// Arrival order within the record; the oldest is dropped first when it is full.
        var rank: UInt32
    }

    /// The user the pushes were for: a device re-enrolled for another user gets none of them.
    var user: String
    /// The `issuedAt` of the registration the pushes were for, when the gateway follows a
    /// registry (0 otherwise): a device revoked and enrolled again gets none of them ([4.14-9]).
    var enrolment: UInt64
    /// Pushes dropped while the device was away, for MISSED ([4.15-3]).
    var missed: UInt32
    /// In delivery order.
    var entries: [Entry]

    var isEmpty: Bool { entries.isEmpty && missed == 0 }
    var owner: QueueOwner { QueueOwner(user: user, enrolment: enrolment) }
    /// A record no push was written to yet (or an empty message).
    var isUnowned: Bool { user.isEmpty }

    init(owner: QueueOwner, missed: UInt32 = 0, entries: [Entry] = []) {
        self.init(user: owner.user, enrolment: owner.enrolment, missed: missed, entries: entries)
    }

    func encoded() -> [UInt8] {
        var writer = ClusterWriter(version: ClusterMessages.version, reserving: 16 + entries.count * 40)
        writer.string(user)
        writer.integer(enrolment)
        writer.integer(missed)
        writer.integer(entries.count)
        for entry in entries {
            entry.push.write(to: &writer)
            writer.integer(entry.returned ? UInt8(1) : 0)
            writer.integer(entry.rank)
        }
        return writer.bytes
    }

    init(user: String, enrolment: UInt64 = 0, missed: UInt32 = 0, entries: [Entry] = []) {
        self.user = user
        self.enrolment = enrolment
        self.missed = missed
        self.entries = entries
    }

    /// An empty message is an empty queue (what a node writes when it takes one).
    init(decoding bytes: [UInt8]) throws(ClusterDecodeError) {
        guard !bytes.isEmpty else {
            self.init(user: "")
            return
        }
        var reader = try ClusterReader(bytes, version: ClusterMessages.version)
        let user = try reader.string()
        let enrolment: UInt64 = try reader.integer()
        let missed = try reader.uint32()
        let count = try reader.count()
        var entries: [Entry] = []
        entries.reserveCapacity(count)
        for _ in 0..<count {
            let push = try ClusterPush(reading: &reader)
            let returned = try reader.uint8() != 0
            let rank = try reader.uint32()
            entries.append(Entry(push: push, returned: returned, rank: rank))
        }
        self.init(user: user, enrolment: enrolment, missed: missed, entries: entries)
    }
}
