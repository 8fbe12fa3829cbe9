/// How a gateway joins a cluster (`securepush gateway --cluster URL --node NAME`).
public struct ClusterConfiguration: Sendable {
    /// NATS servers, as nats://HOST:PORT; JetStream must be enabled on them.
    public var servers: [String]
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
    /// Device ids per forwarded push message, at most (NATS' default message limit is 1 MiB).
    public var maxDevicesPerForward = 16_384

    public init(servers: [String], node: String) {
        self.servers = servers
        self.node = node
    }

    /// Why the configuration cannot be used, if it cannot.
    public var problem: String? {
        if servers.isEmpty { return "--cluster needs at least one nats://HOST:PORT" }
        for server in servers where !server.hasPrefix("nats://") {
            return "cluster server \"\(server)\" is not a nats://HOST:PORT URL"
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

/// The counts of one PUSH across the cluster, complete once every node that holds a
/// target has answered and every offline device's queue was written. Loop-confined.
final class PushTally {
    private(set) var written: UInt32 = 0
    private(set) var queued: UInt32 = 0
    private var outstanding = 1
    private var completion: ((UInt32, UInt32) -> Void)?

    init(completion: @escaping (_ written: UInt32, _ queued: UInt32) -> Void) {
        self.completion = completion
    }

    func add(written: UInt32 = 0, queued: UInt32 = 0) {
        self.written &+= written
        self.queued &+= queued
    }

    /// One more part to wait for.
    func begin() { outstanding += 1 }

    /// A part is done; the last one completes the tally. `seal()` ends the part the
    /// tally starts with, once every part was begun.
    func end() {
        outstanding -= 1
        guard outstanding == 0, let completion else { return }
        self.completion = nil
        completion(written, queued)
    }

    func seal() { end() }
}
