import PushWire

/// What one node tells the others, in the tagged layout of `ClusterWriter`
/// (protocol/CLUSTER.md). Readers skip fields they do not know and take missing ones as
/// their defaults.
enum ClusterMessages {
    /// The major version of the layout, the first byte of every message: bumped only for
    /// a change older readers must refuse.
    static let version: UInt8 = 2
    /// The untagged layout of earlier builds, still read for queue records that JetStream
    /// kept across the upgrade (`QueueRecord(decodingUntagged:)`).
    static let untaggedVersion: UInt8 = 1
}

/// Sent each `ClusterSettings.heartbeatInterval` by the member that speaks for a node (its
/// loop 0, named as the node): the node is alive, under which boot, and whether it needs
/// everyone's presence (it just started or reconnected to NATS, and so may have missed
/// changes). With `loops`, it speaks for every member of the node (CLUSTER.md, "One
/// heartbeat per node"); another member sends one of its own only to ask for presence, or
/// while a node of the previous build is heard.
struct NodeHeartbeat: Equatable {
    var node: String
    /// Random per process start, shared by a node's members: a node restarted under the
    /// same name holds none of the devices its last run held.
    var boot: UInt64
    var devices: Int
    var wantsPresence: Bool
    /// The sender's node runs this many loops; 0 (absent): a build before node heartbeats,
    /// whose heartbeat speaks for its sender alone.
    var loops: Int

    func encoded() -> [UInt8] {
        var writer = ClusterWriter()
        writer.string(.node, node)
        writer.integer(.boot, boot)
        writer.integer(.devices, devices)
        writer.flag(.wantsPresence, wantsPresence)
        if loops > 0 { writer.integer(.loops, loops) }
        return writer.finish()
    }

    init(node: String, boot: UInt64, devices: Int, wantsPresence: Bool, loops: Int = 0) {
        self.node = node
        self.boot = boot
        self.devices = devices
        self.wantsPresence = wantsPresence
        self.loops = loops
    }

    init(decoding bytes: [UInt8]) throws(ClusterDecodeError) {
        self = try ClusterFields.read(bytes, Self.init(reading:))
    }

    private init(reading fields: ClusterFields) throws(ClusterDecodeError) {
        var fields = fields
        var node: String?
        var boot: UInt64 = 0
        var devices = 0
        var wantsPresence = false
        var loops = 0
        while let field = try fields.next() {
            switch field.tag {
            case .node: node = field.string
            case .boot: boot = try field.integer()
            case .devices: devices = Int(clamping: try field.integer())
            case .wantsPresence: wantsPresence = try field.flag()
            case .loops: loops = Int(clamping: try field.integer())
            default: continue
            }
        }
        self.init(node: try node.required(.node), boot: boot, devices: devices, wantsPresence: wantsPresence, loops: loops)
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

extension PresenceChange {
    fileprivate func write(to writer: inout ClusterWriter) {
        writer.string(.deviceID, deviceID)
        writer.flag(.online, online)
        writer.integer(.stamp, stamp)
        writer.string(.user, user)
        writer.strings(.deviceTag, tags)
    }

    fileprivate init(reading fields: ClusterFields) throws(ClusterDecodeError) {
        var fields = fields
        var deviceID: String?
        online = false
        stamp = 0
        user = ""
        tags = []
        while let field = try fields.next() {
            switch field.tag {
            case .deviceID: deviceID = field.string
            case .online: online = try field.flag()
            case .stamp: stamp = try field.integer()
            case .user: user = field.string
            case .deviceTag: tags.append(field.string)
            default: continue
            }
        }
        self.deviceID = try deviceID.required(.deviceID)
    }
}

/// Presence changes of one node, in the order they happened there.
struct PresenceBatch: Equatable {
    var node: String
    var boot: UInt64
    var changes: [PresenceChange]

    func encoded() -> [UInt8] {
        var writer = ClusterWriter(reserving: 32 + changes.count * 56)
        writer.string(.node, node)
        writer.integer(.boot, boot)
        for change in changes {
            writer.nested(.change) { change.write(to: &$0) }
        }
        return writer.finish()
    }

    init(node: String, boot: UInt64, changes: [PresenceChange]) {
        self.node = node
        self.boot = boot
        self.changes = changes
    }

    init(decoding bytes: [UInt8]) throws(ClusterDecodeError) {
        self = try ClusterFields.read(bytes, Self.init(reading:))
    }

    private init(reading fields: ClusterFields) throws(ClusterDecodeError) {
        var fields = fields
        var node: String?
        boot = 0
        changes = []
        changes.reserveCapacity(try fields.count(of: .change))
        while let field = try fields.next() {
            switch field.tag {
            case .node: node = field.string
            case .boot: boot = try field.integer()
            case .change: changes.append(try PresenceChange(reading: field.fields))
            default: continue
            }
        }
        self.node = try node.required(.node)
    }
}

/// The parts of a PUSH a device gets, as they travel between nodes and sit in queues:
/// the body of the device's PUSH frame (the correlation id is each node's own), with the
/// fields queueing needs beside it, and the provider's `user` and `once`, which the
/// device's form leaves out ([4.14-1]).
struct ClusterPush: Equatable {
    var frameBody: [UInt8]
    var priority: UInt8
    var collapseKey: String?
    /// Wall-clock milliseconds; 0 for a push to connected devices only (ttl_s 0).
    var expiresAtWallMs: UInt64
    /// Only this user's devices get it ([4.13-11]): the node a push is forwarded to checks
    /// the devices it names against it. Not kept in queue records, whose owner says whose
    /// they are.
    var user: String?
    /// A later push of the same id with `once` is the same push ([4.13-12]): a node that
    /// delivered it to a device does not deliver it there again, and a queue record that
    /// holds it does not take it again.
    var once: Bool

    var connectedOnly: Bool { expiresAtWallMs == 0 }

    init(frameBody: [UInt8], priority: UInt8, collapseKey: String?, expiresAtWallMs: UInt64, user: String? = nil, once: Bool = false) {
        self.frameBody = frameBody
        self.priority = priority
        self.collapseKey = collapseKey
        self.expiresAtWallMs = expiresAtWallMs
        self.user = user
        self.once = once
    }

    /// From an encoded device frame (`Push.deviceFrame`).
    init(deviceFrame: [UInt8], priority: UInt8, collapseKey: String?, expiresAtWallMs: UInt64, user: String? = nil,
         once: Bool = false) {
        self.init(frameBody: Array(deviceFrame.dropFirst(FrameHeader.size)), priority: priority,
                  collapseKey: collapseKey, expiresAtWallMs: expiresAtWallMs, user: user, once: once)
    }

    /// The notification id: the value of the frame body's `id` field (its first, as
    /// `Push.deviceFrame` writes it); nil if the body has none.
    var id: ArraySlice<UInt8>? {
        var offset = 0
        while offset < frameBody.count {
            let tag = frameBody[offset]
            offset += 1
            var length = 0
            var shift = 0
            while true {
                guard offset < frameBody.count, shift <= 21 else { return nil }
                let byte = frameBody[offset]
                offset += 1
                length |= Int(byte & 0x7F) << shift
                if byte & 0x80 == 0 { break }
                shift += 7
            }
            guard length <= frameBody.count - offset else { return nil }
            if tag == FieldTag.id.rawValue { return frameBody[offset..<(offset + length)] }
            offset += length
        }
        return nil
    }

    /// Whether this and `other` are the same push with `once` ([4.13-12]): both have the
    /// flag and carry the same id.
    func repeats(_ other: ClusterPush) -> Bool {
        guard once, other.once, let id, let otherID = other.id else { return false }
        return id.elementsEqual(otherID)
    }

    /// The push as a queue record keeps it: without `user` (the record's owner is the user).
    var queued: ClusterPush {
        var copy = self
        copy.user = nil
        return copy
    }

    /// The device's PUSH frame with this node's correlation id.
    func deviceFrame(correlation: UInt32) -> [UInt8] {
        var frame: [UInt8] = []
        frame.reserveCapacity(FrameHeader.size + frameBody.count)
        FrameHeader(type: .push, correlation: correlation, bodyLength: UInt32(frameBody.count)).write(into: &frame)
        frame.append(contentsOf: frameBody)
        return frame
    }

    /// Its fields, written inline in the message that carries the push.
    fileprivate func write(to writer: inout ClusterWriter) {
        writer.data(.frameBody, frameBody)
        writer.integer(.priority, priority)
        if let collapseKey { writer.string(.collapseKey, collapseKey) }
        writer.integer(.expiresAtWallMs, expiresAtWallMs)
        // Absent unless set: a push without them is written as builds before them wrote it.
        if let user { writer.string(.pushUser, user) }
        if once { writer.flag(.once, true) }
    }

    /// The fields of a push as they are read from a message that carries one inline.
    fileprivate struct Fields {
        var frameBody: [UInt8]?
        var priority: UInt8 = 0
        var collapseKey: String?
        var expiresAtWallMs: UInt64 = 0
        var user: String?
        var once = false

        /// Takes `field` if it is a push's; false if it is not.
        mutating func take(_ field: ClusterField) throws(ClusterDecodeError) -> Bool {
            switch field.tag {
            case .frameBody: frameBody = field.data
            case .priority: priority = try field.uint8()
            case .collapseKey: collapseKey = field.string
            case .expiresAtWallMs: expiresAtWallMs = try field.integer()
            case .pushUser: user = field.string
            case .once: once = try field.flag()
            default: return false
            }
            return true
        }

        func push() throws(ClusterDecodeError) -> ClusterPush {
            ClusterPush(frameBody: try frameBody.required(.frameBody), priority: priority,
                        collapseKey: collapseKey, expiresAtWallMs: expiresAtWallMs, user: user, once: once)
        }
    }
}

/// A push for devices connected to the node it is sent to.
struct ForwardedPush: Equatable {
    var push: ClusterPush
    var deviceIDs: [String]

    fileprivate func write(to writer: inout ClusterWriter) {
        writer.strings(.deviceID, deviceIDs)
        push.write(to: &writer)
    }

    fileprivate init(reading fields: ClusterFields) throws(ClusterDecodeError) {
        var fields = fields
        var push = ClusterPush.Fields()
        var deviceIDs: [String] = []
        while let field = try fields.next() {
            if try push.take(field) { continue }
            if field.tag == .deviceID { deviceIDs.append(field.string) }
        }
        self.init(push: try push.push(), deviceIDs: deviceIDs)
    }

    init(push: ClusterPush, deviceIDs: [String]) {
        self.push = push
        self.deviceIDs = deviceIDs
    }
}

/// The pushes one node forwards to another in one loop turn, as one NATS request (a
/// burst of unicast pushes costs one message per node, not one per push);
/// `ForwardReplies` answers it.
struct ForwardBatch: Equatable {
    /// Names the batch in the sender's pending list; the reply carries it back.
    var id: UInt64
    var pushes: [ForwardedPush]

    func encoded() -> [UInt8] {
        let size = pushes.reduce(24) { $0 + $1.push.frameBody.count + 40 + $1.deviceIDs.count * 24 }
        var writer = ClusterWriter(reserving: size)
        writer.integer(.batchID, id)
        for forwarded in pushes {
            writer.nested(.forwarded) { forwarded.write(to: &$0) }
        }
        return writer.finish()
    }

    init(id: UInt64, pushes: [ForwardedPush]) {
        self.id = id
        self.pushes = pushes
    }

    init(decoding bytes: [UInt8]) throws(ClusterDecodeError) {
        self = try ClusterFields.read(bytes, Self.init(reading:))
    }

    private init(reading fields: ClusterFields) throws(ClusterDecodeError) {
        var fields = fields
        id = 0
        pushes = []
        pushes.reserveCapacity(try fields.count(of: .forwarded))
        while let field = try fields.next() {
            switch field.tag {
            case .batchID: id = try field.integer()
            case .forwarded: pushes.append(try ForwardedPush(reading: field.fields))
            default: continue
            }
        }
    }
}

/// What a node did with each push of a `ForwardBatch`, in its order: as PUSH_ACK counts ([4.13-3]).
struct ForwardReplies: Equatable {
    struct Counts: Equatable {
        var written: UInt32
        var queued: UInt32

        init(written: UInt32, queued: UInt32) {
            self.written = written
            self.queued = queued
        }

        fileprivate init(reading fields: ClusterFields) throws(ClusterDecodeError) {
            var fields = fields
            written = 0
            queued = 0
            while let field = try fields.next() {
                switch field.tag {
                case .written: written = try field.uint32()
                case .queued: queued = try field.uint32()
                default: continue
                }
            }
        }
    }

    /// The `ForwardBatch.id` answered.
    var id: UInt64
    var counts: [Counts]

    func encoded() -> [UInt8] {
        var writer = ClusterWriter(reserving: 16 + counts.count * 10)
        writer.integer(.batchID, id)
        for count in counts {
            writer.nested(.counts) {
                $0.integer(.written, count.written)
                $0.integer(.queued, count.queued)
            }
        }
        return writer.finish()
    }

    init(id: UInt64, counts: [Counts]) {
        self.id = id
        self.counts = counts
    }

    init(decoding bytes: [UInt8]) throws(ClusterDecodeError) {
        self = try ClusterFields.read(bytes, Self.init(reading:))
    }

    private init(reading fields: ClusterFields) throws(ClusterDecodeError) {
        var fields = fields
        id = 0
        counts = []
        counts.reserveCapacity(try fields.count(of: .counts))
        while let field = try fields.next() {
            switch field.tag {
            case .batchID: id = try field.integer()
            case .counts: counts.append(try Counts(reading: field.fields))
            default: continue
            }
        }
    }
}

/// "The queues of these devices, which you hold, were written: take them."
struct TakeNotice: Equatable {
    var deviceIDs: [String]

    func encoded() -> [UInt8] {
        var writer = ClusterWriter()
        writer.strings(.deviceID, deviceIDs)
        return writer.finish()
    }

    init(deviceIDs: [String]) { self.deviceIDs = deviceIDs }

    init(decoding bytes: [UInt8]) throws(ClusterDecodeError) {
        self = try ClusterFields.read(bytes, Self.init(reading:))
    }

    private init(reading fields: ClusterFields) throws(ClusterDecodeError) {
        var fields = fields
        deviceIDs = []
        while let field = try fields.next() {
            if field.tag == .deviceID { deviceIDs.append(field.string) }
        }
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

        init(push: ClusterPush, returned: Bool, rank: UInt32) {
            self.push = push
            self.returned = returned
            self.rank = rank
        }

        fileprivate func write(to writer: inout ClusterWriter) {
            push.write(to: &writer)
            writer.flag(.returned, returned)
            writer.integer(.rank, rank)
        }

        fileprivate init(reading fields: ClusterFields) throws(ClusterDecodeError) {
            var fields = fields
            var push = ClusterPush.Fields()
            var returned = false
            var rank: UInt32 = 0
            while let field = try fields.next() {
                if try push.take(field) { continue }
                switch field.tag {
                case .returned: returned = try field.flag()
                case .rank: rank = try field.uint32()
                default: continue
                }
            }
            self.init(push: try push.push(), returned: returned, rank: rank)
        }
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
        let size = entries.reduce(32) { $0 + $1.push.frameBody.count + 40 }
        var writer = ClusterWriter(reserving: size)
        writer.string(.user, user)
        writer.integer(.enrolment, enrolment)
        writer.integer(.missed, missed)
        for entry in entries {
            writer.nested(.entry) { entry.write(to: &$0) }
        }
        return writer.finish()
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
        if bytes.first == ClusterMessages.untaggedVersion {
            try self.init(decodingUntagged: bytes)
            return
        }
        self = try ClusterFields.read(bytes, Self.init(reading:))
    }

    private init(reading fields: ClusterFields) throws(ClusterDecodeError) {
        var fields = fields
        var user = ""
        var enrolment: UInt64 = 0
        var missed: UInt32 = 0
        var entries: [Entry] = []
        entries.reserveCapacity(try fields.count(of: .entry))
        while let field = try fields.next() {
            switch field.tag {
            case .user: user = field.string
            case .enrolment: enrolment = try field.integer()
            case .missed: missed = try field.uint32()
            case .entry: entries.append(try Entry(reading: field.fields))
            default: continue
            }
        }
        self.init(user: user, enrolment: enrolment, missed: missed, entries: entries)
    }
}
