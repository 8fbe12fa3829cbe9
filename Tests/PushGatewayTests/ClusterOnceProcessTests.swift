import Testing
import PushClient
import PushTestSupport
import PushWire

/// PUSH's `user` and `once` on a three-node cluster over nats-server with JetStream, every
/// part a process: a repeat entering at another node is delivered nowhere again and gets
/// the first counts, whether the device is connected to another node or its queue waits
/// in JetStream ([4.13-12]), and `user` holds across nodes ([4.13-11]).
@Suite("A three-node gateway cluster: PUSH's user and once", .ownThread, .serialized, .enabled(if: NATSServer.testsEnabled))
struct ClusterOnceProcessTests {
    @Test("[4.13-12] [4.13-11] a repeat via each other node: written and queued once, the first PUSH_ACK each time")
    func repeatAtOtherNodes() throws {
        let devices = [ClusterDevice("a1", tags: ["news"]), ClusterDevice("a2", tags: ["news"]), ClusterDevice("away", tags: ["news"]),
                       ClusterDevice("b1", user: "bob", tags: ["news"])]
        let cluster = try startCluster(users: ["alice", "bob"], devices: devices)
        let a1 = try cluster.connectDevice("a1", to: 0)
        let a2 = try cluster.connectDevice("a2", to: 1)
        let b1 = try cluster.connectDevice("b1", to: 2)
        for device in ["a1", "a2", "b1"] { try cluster.waitUntilEveryNodeRoutes(to: device) }
        let providers = try (0..<3).map { try cluster.provider(via: $0) }

        // "away" is enrolled and never connected: its push waits in JetStream.
        let first = try providers[2].push(.tag("news"), id: "once-1", user: "alice", once: true)
        #expect(first == PushAck(written: 2, queued: 1), "\(cluster.diagnostics())")
        #expect(try providers[0].push(.tag("news"), id: "once-1", user: "alice", once: true) == first)
        #expect(try providers[1].push(.tag("news"), id: "once-1", user: "alice", once: true) == first)
        #expect(try providers[2].push(.user("alice"), id: "after", ttl: 600) == PushAck(written: 2, queued: 1))
        #expect(a1.drain() == [.push("once-1"), .push("after")], "\(cluster.diagnostics())")
        #expect(a2.drain() == [.push("once-1"), .push("after")])
        #expect(b1.drain() == [], "bob's device has the tag but the push is alice's")

        // The queue goes to the node the device connects to, which remembers its once push.
        let away = try cluster.connectDevice("away", to: 1)
        #expect(away.drain() == [.push("once-1"), .push("after")], "queued once: \(cluster.diagnostics())")
        try cluster.waitUntilEveryNodeRoutes(to: "away")
        for via in 0..<3 {
            #expect(try providers[via].push(.tag("news"), id: "once-1", user: "alice", once: true) == first,
                    "via g\(via + 1), after the queue was taken")
        }
        for client in [a1, a2, away, b1] { #expect(client.drain() == [], "nothing delivered again") }
        // Each repeat answered from memory by the two nodes holding alice's devices, once
        // each (the node it entered at, or the one it was forwarded to).
        var repeats: [Double] = []
        #expect(waitUntil {
            repeats = (0..<3).compactMap { cluster.metric($0, "securepush_gateway_pushes_repeated_total") }
            return repeats.reduce(0, +) == 10
        }, "repeats counted by node: \(repeats)")
    }
}
