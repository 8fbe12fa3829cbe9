import Testing
import PushClient
import PushClock
import PushSecurity
import PushTestSupport
import PushWire
@testable import PushGateway

/// A rolling upgrade (CLUSTER.md, "One heartbeat per node" and "Presence by bucket"): a
/// node of the previous build, played by a plain NATS client holding the deployment's key,
/// heartbeats per member (no `loops`) and publishes presence on the unbucketed subject only.
/// The node of this build must still be heard by it, and hear it.
@Suite("A gateway cluster shared with a node of the previous build", .ownThread, .serialized, .enabled(if: NATSServer.testsEnabled))
struct ClusterRollingUpgradeTests {
    @Test("while a previous-build node heartbeats, every loop of g1 heartbeats and presence also goes on the old subject; its presence is read")
    func previousBuildNode() throws {
        let ids = ClusterLoopsProcessTests.ids("phone", perLoop: 1)
        let cluster = try startCluster(nodes: 1, loops: 2, devices: [ClusterDevice("legacy"), ClusterDevice(ids[1][0])])
        let old = try PlainNATSClient(url: cluster.nats.url)
        let seal = ClusterSeal(serverKey: try Deployment.readKey(cluster.directory + "/" + Deployment.serverKeyFile))
        var heartbeatsFrom: [String: NodeHeartbeat] = [:]
        var heartbeatCount: [String: Int] = [:]
        var presenceFrom: [String] = []
        var forwards = 0
        try old.subscribe("securepush.nodes") { bytes in
            guard let opened = try? seal.open(bytes, subject: "securepush.nodes"),
                  let heartbeat = try? NodeHeartbeat(decoding: opened.message) else { return }
            heartbeatsFrom[opened.sender] = heartbeat
            heartbeatCount[opened.sender, default: 0] += 1
        }
        try old.subscribe("securepush.presence") { bytes in
            if let opened = try? seal.open(bytes, subject: "securepush.presence") { presenceFrom.append(opened.sender) }
        }
        try old.subscribe("securepush.node.old.push") { _ in forwards += 1 }
        var nonce: UInt64 = 1
        func send(_ subject: String, _ message: [UInt8]) throws {
            nonce += 1
            try old.publish(subject, seal.seal(message, subject: subject, sender: "old", sentAtMs: Clocks.wallMilliseconds(), nonce: nonce))
        }
        let beat = old.loop.schedule(after: .milliseconds(500), repeating: true) {
            try? send("securepush.nodes", NodeHeartbeat(node: "old", boot: 9, devices: 1, wantsPresence: false).encoded())
        }
        defer { beat.cancel() }

        // Only g1's loop 0 heartbeats each second until the old node is heard (loop 1 asks
        // it for its presence once); then loop 1 does too, each second.
        #expect(old.loop.run(until: { heartbeatCount["g1~1", default: 0] >= 3 }, timeoutSeconds: 6), "\(heartbeatCount)")
        #expect(heartbeatsFrom["g1"]?.loops == 2 && heartbeatsFrom["g1~1"]?.loops == 2)
        #expect(waitUntil { cluster.metric(0, "securepush_gateway_cluster_nodes") == 2 }, "\(cluster.diagnostics())")

        // A device homed on g1's loop 1: announced where the old build listens.
        let phone = try cluster.connectDevice(ids[1][0], to: 0)
        #expect(old.loop.run(until: { presenceFrom.contains("g1~1") }, timeoutSeconds: 5), "\(presenceFrom)")
        #expect(phone.drain() == [])

        // The old node's presence, on the old subject, is read: g1 forwards to it.
        let legacy = PresenceChange(deviceID: "legacy", online: true, stamp: Clocks.wallMilliseconds(), user: "alice", tags: [])
        try send("securepush.presence", PresenceBatch(node: "old", boot: 9, changes: [legacy]).encoded())
        let provider = try cluster.provider(via: 0)
        #expect(waitUntil(timeoutSeconds: 5, pollMilliseconds: 100) {
            _ = try? provider.push(.device("legacy"), id: "probe-\(nonce)", ttl: 0)
            return old.loop.run(until: { forwards > 0 }, timeoutSeconds: 0.1)
        }, "a push for the old node's device is forwarded to it")
        let refused = cluster.metric(0, "securepush_gateway_cluster_messages_rejected_total", by: "reason")
        #expect(refused != nil && refused?.values.allSatisfy { $0 == 0 } == true, "\(String(describing: refused))")
    }
}
