import Foundation
import Testing
import PushClient
import PushEventLoop
import PushProcess
import PushTestSupport
import PushWire

/// The three nodes on separate hosts (issue 15, item 8): each gateway in a network
/// namespace of its own, linked by a veth pair to a bridge in the root namespace where the
/// nats-server and the store listen, so a push routed from node 1 to node 3 crosses two
/// network links. The project's tests otherwise send traffic only to 127.0.0.1; the issue
/// asks for this one, and its addresses (10.200.X.0/24, private) live only on the virtual
/// links this test makes and removes: nothing leaves the machine.
///
/// Needs root and `ip netns` (CI runs as root) and nats-server; skipped otherwise, even with
/// SECUREPUSH_REQUIRE_NATS=1.
@Suite("A gateway cluster across network namespaces", .ownThread, .serialized,
       .enabled(if: NATSServer.available && NetworkNamespaces.available))
struct ClusterNetnsTests {
    @Test("[4.13-3] a push via the node in namespace 1 reaches a device on the node in namespace 3 over the veth links")
    func pushCrossesTheNetwork() throws {
        let hosts = try NetworkNamespaces(count: 3)
        defer { hosts.remove() }
        let setup = try NetnsCluster(hosts: hosts)
        defer { setup.stop() }
        try setup.waitUntilFormed()

        let device = try setup.connectDevice("phone", to: 2)
        let provider = try setup.provider(via: 0)
        var serial = 0
        let routed = waitUntil(timeoutSeconds: 10) {
            serial += 1
            return (try? provider.push(.device("phone"), id: "\(probePrefix)\(serial)", ttl: 0))?.written == 1
        }
        #expect(routed, "g1 learned that phone is on g3: \(setup.diagnostics())")
        #expect(try provider.push(.device("phone"), id: "across", ttl: 600) == PushAck(written: 1, queued: 0))
        #expect(try device.nextFrame() == .push("across"))
        #expect((setup.metric(0, "securepush_gateway_cluster_forwards_sent_total") ?? 0) >= 2, "forwarded by g1")
        #expect((setup.metric(2, "securepush_gateway_cluster_forwards_received_total") ?? 0) >= 2, "received by g3")
        #expect(setup.metric(1, "securepush_gateway_cluster_forwards_received_total") == 0, "no broadcast: g2 holds no target")
    }
}

/// A nats-server on the bridge's second address (so a namespace can be cut off from it
/// alone) and a store on its first, a gateway per namespace.
final class NetnsCluster {
    let hosts: NetworkNamespaces
    let deployment: TemporaryDeployment
    let nats: ChildProcess
    let natsDirectory: String
    let store: ChildProcess
    let storePort: Int
    private(set) var gateways: [(child: ChildProcess, port: Int, metricsPort: Int)] = []

    init(hosts: NetworkNamespaces, devices: [ClusterDevice] = [ClusterDevice("phone")]) throws {
        self.hosts = hosts
        deployment = try TemporaryDeployment(commandLine: true)
        for user in Set(devices.map(\.user)) { try deployment.addUser(user, password: GatewayClusterHarness.password(of: user)) }
        for device in devices { try deployment.enroll(device.id, user: device.user, tags: device.tags) }
        natsDirectory = deployment.directory + "/nats"
        let natsPort = try freeLoopbackPort()
        nats = try ChildProcess(executable: NATSServer.binary ?? "nats-server",
                                arguments: ["-a", hosts.secondHostAddress, "-p", String(natsPort), "-js", "-sd", natsDirectory], name: "nats-server")
        store = try ChildProcess(executable: SecurePushBinary.path,
                                 arguments: ["store", "--data-dir", deployment.directory, "--listen", "\(hosts.hostAddress):0"], name: "store")
        storePort = try NetnsCluster.port(of: store, line: "listening on ")
        guard waitUntil(timeoutSeconds: 20, { (try? BlockingWireClient(host: hosts.secondHostAddress, port: natsPort)) != nil }) else {
            throw ServiceError.failed("nats-server did not listen: \(nats.standardErrorTail)")
        }
        for (index, address) in hosts.addresses.enumerated() {
            let child = try hosts.start(in: index, SecurePushBinary.path, [
                "gateway", "--data-dir", deployment.directory, "--listen", "\(address):0", "--metrics", "\(address):0",
                "--store", "\(hosts.hostAddress):\(storePort)", "--cluster", "nats://\(hosts.secondHostAddress):\(natsPort)", "--node", "g\(index + 1)",
            ], name: "gateway g\(index + 1)")
            let port = try NetnsCluster.port(of: child, line: "listening on ")
            let metricsPort = try NetnsCluster.port(of: child, line: "metrics on ")
            gateways.append((child, port, metricsPort))
        }
    }

    deinit { stop() }

    /// Children first (the gateways' pids are theirs: `ip netns exec` execs), then the
    /// namespaces can go.
    func stop() {
        for gateway in gateways { gateway.child.signal(SIGTERM) }
        for gateway in gateways where gateway.child.wait(seconds: 10) == nil { gateway.child.killHard() }
        gateways = []
        store.terminate(graceSeconds: 10)
        nats.terminate(graceSeconds: 10)
    }

    private static func port(of child: ChildProcess, line prefix: String) throws -> Int {
        let address = try child.waitForLine(prefix: prefix, seconds: 30)
        guard let port = Int(address.split(separator: ":").last ?? "") else { throw ServiceError.failed("bad address \(address)") }
        return port
    }

    func metric(_ index: Int, _ name: String) -> Double? {
        guard let response = get(index, "/metrics") else { return nil }
        let line = response.split(separator: "\r\n").flatMap { $0.split(separator: "\n") }.first { $0.hasPrefix(name + " ") }
        return line.flatMap { Double($0.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces)) }
    }

    /// Whether node `index`'s /readyz answers 200.
    func isReady(_ index: Int) -> Bool {
        get(index, "/readyz")?.hasPrefix("HTTP/1.1 200") ?? false
    }

    private func get(_ index: Int, _ path: String) -> String? {
        guard let client = try? BlockingWireClient(host: hosts.addresses[index], port: gateways[index].metricsPort),
              (try? client.sendRaw(Array("GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n".utf8))) != nil else { return nil }
        return client.readAll()
    }

    var storeEndpoint: ServerLink.Endpoint { ServerLink.Endpoint(host: hosts.hostAddress, port: storePort) }
    var gatewayAddresses: [HostPort] { gateways.indices.map { HostPort(host: hosts.addresses[$0], port: gateways[$0].port) } }

    func waitUntilFormed() throws {
        let formed = waitUntil(timeoutSeconds: 20) {
            self.gateways.indices.allSatisfy { self.metric($0, "securepush_gateway_cluster_nodes") == 3 }
        }
        guard formed else { throw ServiceError.failed("the cluster did not form:\n\(diagnostics())") }
    }

    func connectDevice(_ device: String, to index: Int) throws -> BlockingWireClient {
        let credential = try deployment.enrolledRegistration(device)
        var last = "no attempt"
        var connected: BlockingWireClient?
        try waitUntil(timeoutSeconds: 10, pollMilliseconds: 100) {
            let client = try BlockingWireClient(host: hosts.addresses[index], port: gateways[index].port)
            let reply = try client.hello(Hello(role: .device, credential: credential))
            if case .helloOK = reply { connected = client }
            last = "\(reply)"
            return connected != nil
        }
        guard let connected else { throw ServiceError.failed("\(device) could not connect: \(last)") }
        return connected
    }

    func provider(via index: Int) throws -> BlockingWireClient {
        let client = try BlockingWireClient(host: hosts.addresses[index], port: gateways[index].port)
        let reply = try client.hello(Hello(role: .provider, credential: deployment.providerCredential(for: .gateway)))
        guard case .helloOK = reply else { throw ServiceError.failed("provider HELLO refused: \(reply)") }
        return client
    }

    func diagnostics() -> String {
        gateways.enumerated().map { "--- g\($0.offset + 1) ---\n" + $0.element.child.standardError.split(separator: "\n").suffix(20).joined(separator: "\n") }
            .joined(separator: "\n") + "\n--- nats ---\n" + nats.standardErrorTail
    }
}
