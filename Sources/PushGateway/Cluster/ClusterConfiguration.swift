import PushNATS

/// How a gateway joins a cluster (`securepush gateway --cluster URL --node NAME`).
public struct ClusterConfiguration: Sendable {
    /// NATS servers, as nats://HOST:PORT (or tls://); JetStream must be enabled on them.
    public var servers: [String]
    /// TLS and credentials for the NATS connections; none by default.
    public var security = NATSSecurity()
    /// Unique in the cluster: other nodes address this one by it.
    public var node: String
    public var subjects = ClusterSubjects()
    /// How often a node tells the others it is alive.
    public var heartbeatInterval: Duration = .seconds(1)
    /// A node not heard from for this long is taken as dead: its devices count as
    /// offline, and pushes for them are queued in JetStream until they connect again.
    public var nodeTimeout: Duration = .seconds(3)
    /// How long a node waits for another to answer a push it forwarded, before it queues
    /// the push in JetStream for that node's devices instead.
    public var forwardTimeout: Duration = .seconds(2)
    /// How this node notices that its own NATS link went dead (a server killed without a
    /// reset, a network cut): within 3 s, and while it is gone the node says it is not
    /// ready and counts no other node as silent (it cannot hear them).
    public var natsPing = NATSConnection.PingSettings(interval: .seconds(1), maxOutstanding: 2)
    /// How soon a NATS connection libnats gave up on (a server refused it twice in a row
    /// with the same authorization error) is opened again: 1 s, doubling to 30 s, jittered.
    public var natsReopen = NATSConnection.ReopenSettings.standard
    /// Device ids per forwarded push message, at most (NATS' default message limit is 1 MiB).
    public var maxDevicesPerForward = 16_384
    /// Which loop of its node this copy is for: each loop of a node joins the cluster as a
    /// member of its own, with its own NATS connection, and holds the devices whose home
    /// it is (`LoopPlacement`).
    var loop = 0
    /// Random per process start, shared by the node's loops (set when they start): every
    /// member of a node speaks under one boot, which the node's heartbeat names for all.
    var boot: UInt64?

    /// The name this loop goes by in the cluster: the node's name for its first loop,
    /// NAME~K for loop K. A node name cannot hold `~`, so no other node's name is taken.
    var member: String { loop == 0 ? node : "\(node)\(ClusterConfiguration.memberSeparator)\(loop)" }

    static let memberSeparator: Character = "~"

    /// The node a member name belongs to.
    static func node(ofMember member: String) -> Substring {
        member.split(separator: memberSeparator, maxSplits: 1, omittingEmptySubsequences: false).first ?? Substring(member)
    }

    public init(servers: [String], node: String) {
        self.servers = servers
        self.node = node
    }

    /// Why the configuration cannot be used, if it cannot.
    public var problem: String? {
        if servers.isEmpty { return "--cluster needs at least one nats://HOST:PORT" }
        for server in servers where !server.hasPrefix("nats://") && !server.hasPrefix("tls://") {
            return "cluster server \"\(NATSNames.redacted(server))\" is not a nats://HOST:PORT or tls://HOST:PORT URL"
        }
        if !ClusterSubjects.isValidNodeName(node) {
            return "node name \"\(node)\" must be 1 to 64 letters, digits, '-' or '_'"
        }
        if heartbeatInterval <= .zero || nodeTimeout <= heartbeatInterval {
            return "the node timeout must be longer than the heartbeat interval"
        }
        return nil
    }
}
