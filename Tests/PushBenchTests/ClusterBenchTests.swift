import Foundation
import PushEventLoop
import PushTestSupport
import Testing
@testable import PushBench

/// The bench against a gateway cluster (issue 15.9): the settings it refuses, the
/// nats-server it would start and how it reads its counters, how links are spread over
/// the gateways, and running gateways given as a list. (An embedded cluster run end to end
/// needs `securepush gateway --cluster`; these check what stands without it.)
@Suite(.ownThread, .serialized)
struct ClusterBenchTests {
    private func refusal(_ options: TargetOptions, _ scenario: Scenario) -> String? {
        do {
            try options.validate(for: scenario)
            return nil
        } catch {
            return error.description
        }
    }

    @Test func clusterSettingsAreCheckedBeforeAnythingStarts() {
        var embedded = TargetOptions()
        embedded.gatewayCount = 3
        #expect(refusal(embedded, .push) == nil)
        #expect(refusal(embedded, .fanout) == nil)
        #expect(refusal(embedded, .e2e) == nil)
        #expect(refusal(embedded, .store)?.contains("go with push, fanout and e2e") == true)
        #expect(refusal(embedded, .connections)?.contains("go with push, fanout and e2e") == true)
        embedded.gatewayCount = 0
        #expect(refusal(embedded, .push) == "--gateways must be 1 to \(TargetOptions.maxGateways)")
        embedded.gatewayCount = TargetOptions.maxGateways + 1
        #expect(refusal(embedded, .push) == "--gateways must be 1 to \(TargetOptions.maxGateways)")

        var single = TargetOptions()
        single.cluster = true
        #expect(single.embeddedCluster, "--nats makes a one-node cluster")
        #expect(refusal(single, .push) == nil)

        var running = TargetOptions()
        running.gateways = [HostPort(host: "127.0.0.1", port: 7071), HostPort(host: "127.0.0.1", port: 7081)]
        #expect(refusal(running, .push) == nil, "a list of running gateways is what a cluster run against running nodes takes")
        #expect(refusal(running, .connections) == "connections measures one gateway's memory: give one --gateway")
        running.gatewayCount = 2
        #expect(refusal(running, .push)?.contains("running ones are named by --gateway A,B,C") == true)
        running.gatewayCount = 1
        running.cluster = true
        #expect(refusal(running, .push)?.contains("--gateways and --nats are for the embedded gateways") == true)
    }

    @Test func natsServerCommandLine() {
        #expect(NATSServerProcess.arguments(port: 4222, monitorPort: 8222, storeDirectory: "/tmp/b/jetstream")
                == ["-a", "127.0.0.1", "-p", "4222", "-js", "-sd", "/tmp/b/jetstream", "-m", "8222"])
        #expect(EmbeddedDeployment.clusterArguments(natsURL: nil, node: 1) == [], "the plain gateway, as before clusters")
        #expect(EmbeddedDeployment.clusterArguments(natsURL: "nats://127.0.0.1:4222", node: 2)
                == ["--cluster", "nats://127.0.0.1:4222", "--node", "gateway-2"], "no --store: the single gateway follows no registry either")
    }

    @Test func natsServerIsFoundOnPathThenInSbinElseTheErrorSaysWhatToInstall() throws {
        let present: Set = ["/opt/nats/bin/nats-server", "/usr/sbin/nats-server"]
        let found = { (path: String) in present.contains(path) }
        #expect(try NATSServerProcess.locate(path: "/usr/bin:/opt/nats/bin", isExecutable: found) == "/opt/nats/bin/nats-server")
        #expect(try NATSServerProcess.locate(path: "/usr/bin:/bin", isExecutable: found) == "/usr/sbin/nats-server")
        #expect(try NATSServerProcess.locate(path: nil, isExecutable: found) == "/usr/sbin/nats-server")
        do {
            _ = try NATSServerProcess.locate(path: "/usr/bin", isExecutable: { _ in false })
            Issue.record("found a nats-server where there is none")
        } catch {
            #expect(error.description.contains("apt-get install nats-server"), "\(error)")
            #expect(error.description.contains("/usr/sbin"), "\(error)")
        }
    }

    @Test func varzCountersAreReadFromTheTopLevel() throws {
        let varz = """
        {
          "server_id": "NDJ", "version": "2.9.10",
          "connections": 3,
          "in_msgs": 1523,
          "out_msgs":  40961,
          "in_bytes": 99, "out_bytes": 100,
          "jetstream": {"stats": {"api": {"total": 7}}}
        }
        """
        #expect(NATSCounters(varz: varz) == NATSCounters(inMessages: 1523, outMessages: 40961))
        #expect(NATSCounters(varz: #"{"in_msgs": 5}"#) == nil, "out_msgs missing")
        #expect(NATSCounters(varz: #"{"in_msgs": "x", "out_msgs": 1}"#) == nil)
        #expect(NATSCounters.number(named: "in_msgs", in: #"{"in_msgs_total": 9, "in_msgs": 4}"#) == 4, "the whole key, not a prefix")
        #expect(NATSCounters.number(named: "in_msgs", in: #"{"in_msgs": 99999999999999999999999}"#) == nil, "overflow")

        let before = NATSCounters(inMessages: 100, outMessages: 1_000)
        let after = NATSCounters(inMessages: 400, outMessages: 1_600)
        let perPush = try #require(after.perPush(since: before, pushes: 100))
        #expect(perPush.inbound == 3 && perPush.outbound == 6)
        #expect(after.perPush(since: before, pushes: 0) == nil)
        #expect(before.perPush(since: after, pushes: 10) == nil, "a restarted server's counters went back")
    }

    @Test func httpRepliesOtherThan200AreRefused() throws {
        let ok = Array("HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{\"in_msgs\":1}".utf8)
        #expect(try LoopbackHTTP.body(of: ok, from: "u") == "{\"in_msgs\":1}")
        #expect(throws: BenchError.self) { try LoopbackHTTP.body(of: Array("HTTP/1.1 404 Not Found\r\n\r\n".utf8), from: "u") }
        #expect(throws: BenchError.self) { try LoopbackHTTP.body(of: Array("HTTP/1.1 200 OK\r\nX: y".utf8), from: "u") }
        #expect(throws: BenchError.self) { try LoopbackHTTP.body(of: [], from: "u") }
    }

    @Test func linksAreSpreadOverTheGatewaysInTurn() {
        let a = HostPort(host: "127.0.0.1", port: 1), b = HostPort(host: "127.0.0.1", port: 2), c = HostPort(host: "127.0.0.1", port: 3)
        #expect(BenchSession.spread(7, over: [a, b, c]) == [a, b, c, a, b, c, a])
        #expect(BenchSession.spread(2, over: [a, b, c]) == [a, b], "fewer links than gateways: the first ones get one each")
        #expect(BenchSession.spread(3, over: [a]) == [a, a, a])
        #expect(BenchSession.spread(3, over: []) == [])
        #expect(CPUUsage.gatewayNames(count: 1) == ["gateway"])
        #expect(CPUUsage.gatewayNames(count: 3) == ["gateway1", "gateway2", "gateway3"])
    }

    /// The real nats-server, as an embedded cluster run starts it: JetStream healthy,
    /// /varz read over the bench's own GET and counting a message published, gone (with
    /// its port) after stop.
    @Test(.enabled(if: NATSServer.testsEnabled, "nats-server is not installed"))
    func natsServerStartsAnswersVarzAndStops() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("securepush-nats-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try NATSServerProcess(storeDirectory: directory)
        let before = try #require(server.counters())
        #expect(server.clientURL.hasPrefix("nats://127.0.0.1:"))
        let health = try LoopbackHTTP.get(server.monitor, path: "/healthz")
        #expect(health.contains("ok"), "\(health)")
        try publishOne(to: try #require(Int(server.clientURL.split(separator: ":").last ?? "")))
        let after = try #require(server.counters())
        #expect(after.inMessages > before.inMessages, "the message published is counted: \(before) -> \(after)")
        server.stop()
        #expect(server.child.hasExited)
        #expect(server.counters() == nil)
    }

    /// One PUB from a plain client of the server on 127.0.0.1:`port`, and its PONG back, so
    /// the server has taken the message when this returns.
    private func publishOne(to port: Int) throws {
        let fd = try LoopbackSocket.connect(port: port, receiveTimeoutMs: 10_000)
        defer { close(fd) }
        let request = Array("CONNECT {\"verbose\":false}\r\nPUB bench.test 2\r\nhi\r\nPING\r\n".utf8)
        try #require(write(fd, request, request.count) == request.count)
        var received = ""
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !received.contains("PONG") {
            let count = read(fd, &buffer, buffer.count)
            try #require(count > 0, "no PONG: \(received)")
            received += String(decoding: buffer[..<count], as: UTF8.self)
        }
    }

    @Test func runningGatewaysAsAListAreCountedInTheReport() throws {
        let deployment = try TemporaryDeployment()
        let gateway = try InProcessGateway(deployment)
        defer { gateway.stop() }
        let address = "127.0.0.1:\(gateway.port)"
        // One gateway named twice: the list's plumbing end to end with no cluster needed.
        let result = try SecurePushBinary.run(["bench", "push", "--gateway", "\(address),\(address)", "--data-dir", deployment.directory,
                                               "--count", "100", "--devices", "6", "--connections", "2", "--inflight", "4",
                                               "--warmup", "0", "--no-progress", "--json"], timeoutSeconds: 60)
        #expect(result.status == 0, "\(result.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(json["gateways"] as? Int == 2)
        #expect(json["gateway"] as? String == "\(address),\(address)")
        #expect(json["nats"] == nil, "running services: the bench does not know how they are joined")
        #expect(json["operations"] as? Int == 100)

        let refused = try SecurePushBinary.run(["bench", "push", "--gateway", address, "--gateways", "2", "--data-dir", deployment.directory])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("--gateways and --nats are for the embedded gateways"), "\(refused.stderr)")
        let badList = try SecurePushBinary.run(["bench", "fanout", "--gateway", "\(address),,\(address)", "--data-dir", deployment.directory])
        #expect(badList.status != 0)
        #expect(badList.stderr.contains("address 2 of 3 is empty"), "\(badList.stderr)")
    }
}
