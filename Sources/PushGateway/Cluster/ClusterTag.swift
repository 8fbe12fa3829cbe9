/// Field tags of the cluster messages (protocol/CLUSTER.md). As in the protocol's tag
/// table, the namespace is global: a tag has one meaning and one value type in every
/// message that carries it. A tag once used is never given another meaning.
struct ClusterTag: RawRepresentable, Hashable, Sendable {
    var rawValue: UInt8
    init(rawValue: UInt8) { self.rawValue = rawValue }

    static let node = ClusterTag(rawValue: 0x01)
    static let boot = ClusterTag(rawValue: 0x02)
    static let devices = ClusterTag(rawValue: 0x03)
    static let wantsPresence = ClusterTag(rawValue: 0x04)
    static let change = ClusterTag(rawValue: 0x05)
    static let deviceID = ClusterTag(rawValue: 0x06)
    static let online = ClusterTag(rawValue: 0x07)
    static let stamp = ClusterTag(rawValue: 0x08)
    static let user = ClusterTag(rawValue: 0x09)
    static let deviceTag = ClusterTag(rawValue: 0x0A)
    static let batchID = ClusterTag(rawValue: 0x0B)
    static let forwarded = ClusterTag(rawValue: 0x0C)
    static let counts = ClusterTag(rawValue: 0x0D)
    static let written = ClusterTag(rawValue: 0x0E)
    static let queued = ClusterTag(rawValue: 0x0F)
    static let frameBody = ClusterTag(rawValue: 0x10)
    static let priority = ClusterTag(rawValue: 0x11)
    static let collapseKey = ClusterTag(rawValue: 0x12)
    static let expiresAtWallMs = ClusterTag(rawValue: 0x13)
    static let enrolment = ClusterTag(rawValue: 0x14)
    static let missed = ClusterTag(rawValue: 0x15)
    static let entry = ClusterTag(rawValue: 0x16)
    static let returned = ClusterTag(rawValue: 0x17)
    static let rank = ClusterTag(rawValue: 0x18)
    /// A push's `user` ([4.13-11]); not 0x09, the user a queue or a device belongs to.
    static let pushUser = ClusterTag(rawValue: 0x19)
    /// A push's `once` ([4.13-12]).
    static let once = ClusterTag(rawValue: 0x1A)
    /// How many loops (members) the heartbeat's node runs.
    static let loops = ClusterTag(rawValue: 0x1B)
}
