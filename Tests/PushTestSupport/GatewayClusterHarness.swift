import Foundation
import PushClient
import PushProcess
import PushWire

/// A device enrolled in a cluster harness's deployment before its services start.
public struct ClusterDevice: Sendable {
    public var id: String
    public var user: String
    public var tags: [String]

    public init(_ id: String, user: String = "alice", tags: [String] = []) {
        self.id = id
        self.user = user
        self.tags = tags
    }
}

/// A gateway cluster as an operator runs it, every part a real process: one deployment
/// (`securepush init`), one nats-server with JetStream, one store, and N `securepush
/// gateway --cluster URL --node gK --store S --loops L` nodes on free ports of 127.0.0.1. Each node
/// follows the store's registry, so every device is enrolled before the services start.
///
/// Formed means every node answers /readyz (NATS and JetStream set up, registry loaded)
/// and counts every live node in `securepush_gateway_cluster_nodes` (heartbeats heard).
public final class GatewayClusterHarness {
    public let deployment: TemporaryDeployment
    public let nats: NATSServer
    public let store: ServiceProcess
    public let names: [String]
    /// Nil once killed or stopped.
    public private(set) var nodes: [ServiceProcess?]
    private let gatewayArguments: [String]
    /// Loop threads per node (`--loops`).
    public let loops: Int
    private var registrations: [String: [UInt8]] = [:]
    /// With `storeForwards`, each node's port, fixed before the store starts (it is given
    /// them all) and kept across a restart.
    private let nodePorts: [Int]?
    /// The relays of the nodes that reach the nats-server through one (`natsRelayed`), by
    /// index: `cut()` cuts that node alone off from NATS.
    public let natsRelays: [Int: TCPRelay]

    public var directory: String { deployment.directory }

    /// - Parameters:
    ///   - loops: loop threads per node, each a member of the cluster of its own.
    ///   - gatewayArguments: passed to every node (e.g. `--queue-capacity 2`).
    ///   - storeForwards: the store hands SENDs' pushes to the nodes (`store --gateway`
    ///     with every node's address, the first first), and serves /metrics.
    ///   - storeGateways: with `storeForwards`, the nodes whose addresses the store is
    ///     given, in that order (nil: every node).
    ///   - natsRelayed: nodes that reach the nats-server through a `TCPRelay` of their own.
    ///   - natsSecurity: TLS and authentication the nats-server asks for (the nodes' own
    ///     flags for them go in `gatewayArguments`).
    public init(nodes count: Int = 3, loops: Int = 1, users: [String] = ["alice"], devices: [ClusterDevice] = [],
                gatewayArguments: [String] = [], storeForwards: Bool = false, storeGateways: [Int]? = nil,
                natsRelayed: Set<Int> = [], natsSecurity: NATSServerSecurity = NATSServerSecurity()) throws {
        deployment = try TemporaryDeployment(commandLine: true)
        for user in users { try deployment.addUser(user, password: GatewayClusterHarness.password(of: user)) }
        for device in devices {
            registrations[device.id] = try deployment.enroll(device.id, user: device.user, tags: device.tags)
        }
        nats = try NATSServer(security: natsSecurity)
        var relays: [Int: TCPRelay] = [:]
        for index in natsRelayed { relays[index] = try TCPRelay(to: nats.port) }
        natsRelays = relays
        if storeForwards {
            let ports = try (0..<count).map { _ in try freeLoopbackPort() }
            nodePorts = ports
            let given = storeGateways.map { $0.map { ports[$0] } } ?? ports
            store = try ServiceProcess(["store", "--data-dir", deployment.directory, "--metrics", "127.0.0.1:0", "--loops", "1",
                                        "--gateway", given.map { "127.0.0.1:\($0)" }.joined(separator: ",")])
        } else {
            nodePorts = nil
            store = try ServiceProcess(["store", "--data-dir", deployment.directory])
        }
        names = (1...count).map { "g\($0)" }
        self.gatewayArguments = gatewayArguments
        self.loops = loops
        nodes = []
        for name in names { nodes.append(try startNode(name)) }
    }

    deinit { stopAll() }

    public static func password(of user: String) -> String { "\(user)-pw" }

    private func startNode(_ name: String) throws -> ServiceProcess {
        let index = names.firstIndex(of: name)
        let port = index.flatMap { nodePorts?[$0] } ?? 0
        let natsURL = index.flatMap { natsRelays[$0]?.url } ?? nats.url
        return try ServiceProcess(["gateway", "--data-dir", deployment.directory, "--store", "127.0.0.1:\(store.port)",
                                   "--cluster", natsURL, "--node", name, "--loops", "\(loops)", "--metrics", "127.0.0.1:0"] + gatewayArguments,
                                  listen: "127.0.0.1:\(port)")
    }

    /// The registration of an enrolled device, as the device presents it at HELLO.
    public func registration(_ device: String) throws -> [UInt8] {
        if let known = registrations[device] { return known }
        let made = try deployment.enrolledRegistration(device)
        registrations[device] = made
        return made
    }

    /// Enrolls a device again (revoking its current registration), as `securepush device
    /// enroll` does; the new registration is the one `connectDevice` presents from now on.
    public func enroll(_ device: ClusterDevice) throws {
        registrations[device.id] = try deployment.enroll(device.id, user: device.user, tags: device.tags)
    }

    public func node(_ index: Int) throws -> ServiceProcess {
        guard nodes.indices.contains(index), let node = nodes[index] else { throw ServiceError.failed("node \(index) is not running") }
        return node
    }

    public var liveIndices: [Int] { nodes.indices.filter { nodes[$0] != nil } }

    /// Every live node ready and counting `expected` nodes (default: the live ones).
    public func waitUntilFormed(nodes expected: Int? = nil, timeoutSeconds: Double = 20) throws {
        let want = Double(expected ?? liveIndices.count)
        let formed = waitUntil(timeoutSeconds: timeoutSeconds) {
            self.liveIndices.allSatisfy { index in
                self.isReady(index) && self.metric(index, "securepush_gateway_cluster_nodes") == want
            }
        }
        guard formed else { throw ServiceError.failed("the cluster did not form (\(Int(want)) nodes):\n\(diagnostics())") }
    }

    public func isReady(_ index: Int) -> Bool {
        guard let port = try? node(index).announcedMetricsPort else { return false }
        return (try? HTTPGet.fetch(port: port, path: "/readyz").status) == 200
    }

    /// A sample of a node's /metrics without labels (or with exactly `labels`), if present.
    public func metric(_ index: Int, _ name: String, labels: String = "") -> Double? {
        guard let port = try? node(index).announcedMetricsPort, let text = try? HTTPGet.metrics(port: port) else { return nil }
        let key = labels.isEmpty ? name + " " : "\(name){\(labels)} "
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(key) }) else { return nil }
        return Double(line.dropFirst(key.count).trimmingCharacters(in: .whitespaces))
    }

    /// A node's samples of `name`, by the value of their `label`; nil if /metrics could not
    /// be read or has no such sample.
    public func metric(_ index: Int, _ name: String, by label: String) -> [String: Double]? {
        guard let port = try? node(index).announcedMetricsPort, let text = try? HTTPGet.metrics(port: port),
              let exposition = try? MetricsExposition(parsing: text) else { return nil }
        var values: [String: Double] = [:]
        for family in exposition.families {
            for sample in family.samples where sample.name == name {
                if let value = sample.labels[label] { values[value, default: 0] += sample.value }
            }
        }
        return values.isEmpty ? nil : values
    }

    // MARK: clients

    /// A device connected to node `index` (retrying BUSY while the node loads the registry).
    public func connectDevice(_ device: String, to index: Int, timeoutSeconds: Double = 10) throws -> BlockingWireClient {
        let credential = try registration(device)
        var last = "no attempt"
        var connected: BlockingWireClient?
        waitUntil(timeoutSeconds: timeoutSeconds, pollMilliseconds: 100) {
            do {
                let client = try node(index).connect()
                let reply = try client.hello(Hello(role: .device, credential: credential))
                if case .helloOK = reply { connected = client }
                last = "\(reply)"
            } catch {
                last = "\(error)"
            }
            return connected != nil
        }
        guard let connected else { throw ServiceError.failed("device \(device) could not connect to \(names[index]): \(last)") }
        return connected
    }

    public func provider(via index: Int) throws -> BlockingWireClient {
        let client = try node(index).connect()
        let reply = try client.hello(Hello(role: .provider, credential: deployment.providerCredential(for: .gateway)))
        guard case .helloOK = reply else { throw ServiceError.failed("provider HELLO at \(names[index]) refused: \(reply)") }
        return client
    }

    // MARK: failures and stopping

    /// SIGKILL: a crash, no GOAWAY, no queue handed over.
    public func kill(_ index: Int) {
        nodes[index]?.killHard()
        nodes[index] = nil
    }

    /// Starts a killed or stopped node again under its name (a new boot to the others).
    public func restart(_ index: Int) throws {
        guard nodes[index] == nil else { throw ServiceError.failed("\(names[index]) is still running") }
        nodes[index] = try startNode(names[index])
    }

    /// SIGTERM every node, then the store; the nats-server stops with its object.
    public func stopAll() {
        // Signalled together: each node's drain waits for its queue writes, in parallel.
        let running = nodes.compactMap { $0 }
        nodes = nodes.map { _ in nil }
        for node in running { node.child.signal(SIGTERM) }
        for node in running where node.child.wait(seconds: 15) == nil { node.killHard() }
        _ = store.terminate()
        for relay in natsRelays.values { relay.cut() }
    }

    /// The end of every live node's log and the nats-server's, for failure messages.
    public func diagnostics(lines: Int = 25) -> String {
        var parts: [String] = []
        for index in liveIndices {
            let log = (try? node(index).standardErrorText()) ?? ""
            parts.append("--- \(names[index]) ---\n" + log.split(separator: "\n").suffix(lines).joined(separator: "\n"))
        }
        parts.append("--- nats-server ---\n" + nats.log.split(separator: "\n").suffix(lines).joined(separator: "\n"))
        return parts.joined(separator: "\n")
    }
}
