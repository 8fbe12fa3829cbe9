import Foundation
import Testing
import PushClient
import PushTestSupport
import PushWire

/// Three `securepush gateway --cluster` processes over a nats-server with JetStream and a
/// store (issue 15, item 8): routing across nodes, cluster-wide PUSH_ACK counts, queues
/// that follow a device to another node, and one connection per device id.
@Suite("A three-node gateway cluster, every part a process", .ownThread, .serialized, .enabled(if: NATSServer.testsEnabled))
struct ClusterProcessTests {
    @Test("[4.13-3] a push via each node reaches a device on each other node; written counts devices across the cluster")
    func pushesAcrossNodes() throws {
        let devices = (0..<3).map { ClusterDevice("d\($0)", tags: ["all"]) }
        let cluster = try startCluster(devices: devices)
        let clients = try (0..<3).map { try cluster.connectDevice("d\($0)", to: $0) }
        for device in 0..<3 { try cluster.waitUntilEveryNodeRoutes(to: "d\(device)") }
        for via in 0..<3 {
            let provider = try cluster.provider(via: via)
            for target in 0..<3 where target != via {
                let id = "from-g\(via + 1)-to-d\(target)"
                #expect(try provider.push(.device("d\(target)"), id: id) == PushAck(written: 1, queued: 0), "\(cluster.diagnostics())")
                #expect(try clients[target].nextFrame() == .push(id))
            }
            let everyone = "user-via-g\(via + 1)"
            #expect(try provider.push(.user("alice"), id: everyone) == PushAck(written: 3, queued: 0))
            for client in clients { #expect(try client.nextFrame() == .push(everyone)) }
        }
        for client in clients { #expect(client.drain() == [], "each push arrived once") }
    }

    @Test("[4.13-3] fan-out to a tag spread over three nodes, and to a user with devices on two")
    func fanOut() throws {
        let tagged = (0..<9).map { ClusterDevice("t\($0)", tags: ["news"]) }
        let bobs = [ClusterDevice("bob-phone", user: "bob"), ClusterDevice("bob-tablet", user: "bob")]
        let cluster = try startCluster(users: ["alice", "bob"], devices: tagged + bobs + [ClusterDevice("untagged")])
        var clients: [String: BlockingWireClient] = [:]
        for index in 0..<9 { clients["t\(index)"] = try cluster.connectDevice("t\(index)", to: index % 3) }
        clients["bob-phone"] = try cluster.connectDevice("bob-phone", to: 0)
        clients["bob-tablet"] = try cluster.connectDevice("bob-tablet", to: 1)
        clients["untagged"] = try cluster.connectDevice("untagged", to: 2)
        for device in clients.keys { try cluster.waitUntilEveryNodeRoutes(to: device) }

        for via in 0..<3 {
            let id = "news-via-g\(via + 1)"
            let ack = try cluster.provider(via: via).push(.tag("news"), id: id)
            #expect(ack == PushAck(written: 9, queued: 0), "\(cluster.diagnostics())")
            for index in 0..<9 { #expect(clients["t\(index)"]?.drain() == [.push(id)], "t\(index) once") }
        }
        #expect(clients["untagged"]?.drain() == [], "the tag reached no other device")
        #expect(clients["bob-tablet"]?.drain() == [])

        let bobsAck = try cluster.provider(via: 2).push(.user("bob"), id: "for-bob")
        #expect(bobsAck == PushAck(written: 2, queued: 0), "bob's devices are on g1 and g2, the push came via g3")
        #expect(clients["bob-phone"]?.drain() == [.push("for-bob")])
        #expect(clients["bob-tablet"]?.drain() == [.push("for-bob")])
        #expect(clients["t0"]?.drain() == [], "alice's devices got none of bob's")
    }

    @Test("[4.13-7] [4.13-9] [4.15-1] an offline device's queue follows it to another node: full queue, MISSED, newest kept")
    func queueFollowsDevice() throws {
        let cluster = try startCluster(devices: [ClusterDevice("phone")], gatewayArguments: ["--queue-capacity", "2"])
        let first = try cluster.connectDevice("phone", to: 0)
        try cluster.waitUntilEveryNodeRoutes(to: "phone")
        // The probes acknowledged: one written and left unacknowledged would count as
        // missed when the connection closes ([4.15-3]).
        #expect(first.drain() == [])
        first.shutdownWrite()
        #expect(first.waitForClose())
        // Every node hears that it left: until then a push is forwarded to g1, which queues it.
        #expect(waitUntil { cluster.metric(0, "securepush_gateway_devices_online") == 0 })

        let viaB = try cluster.provider(via: 1)
        #expect(try viaB.push(.device("phone"), id: "m1") == PushAck(written: 0, queued: 1), "\(cluster.diagnostics())")
        #expect(try viaB.push(.device("phone"), id: "m2") == PushAck(written: 0, queued: 1))
        #expect(try cluster.provider(via: 0).push(.device("phone"), id: "m3") == PushAck(written: 0, queued: 1),
                "written by another node into the same queue")
        #expect(try viaB.push(.device("phone"), id: "live-only", ttl: 0) == PushAck(written: 0, queued: 0), "[4.13-10]")

        let again = try cluster.connectDevice("phone", to: 2)
        let frames = again.drain(quietMs: 1_500)
        #expect(frames == [.missed(1), .push("m2"), .push("m3")], "MISSED first, then the two newest ([4.14-8]): \(cluster.diagnostics())")
        #expect(cluster.metric(2, "securepush_gateway_cluster_queues_taken_total") == 1)
    }

    @Test("[4.13-5] collapse key and priority in a queue written by three nodes, delivered on a fourth connection elsewhere")
    func collapseAndPriorityAcrossNodes() throws {
        let cluster = try startCluster(devices: [ClusterDevice("tablet")], gatewayArguments: ["--queue-capacity", "3"])
        try cluster.connectDevice("tablet", to: 2).shutdownWrite()
        #expect(waitUntil { cluster.metric(2, "securepush_gateway_devices_online") == 0 })
        let providers = try (0..<3).map { try cluster.provider(via: $0) }
        #expect(try providers[0].push(.device("tablet"), id: "score-1", collapse: "score") == PushAck(written: 0, queued: 1))
        #expect(try providers[1].push(.device("tablet"), id: "low", priority: 1) == PushAck(written: 0, queued: 1))
        #expect(try providers[2].push(.device("tablet"), id: "score-2", collapse: "score") == PushAck(written: 0, queued: 1))
        #expect(try providers[0].push(.device("tablet"), id: "urgent", priority: 10) == PushAck(written: 0, queued: 1))
        let client = try cluster.connectDevice("tablet", to: 1)
        let frames = client.drain(quietMs: 1_500)
        #expect(frames == [.push("urgent"), .push("score-2"), .push("low")],
                "higher priority first, score-1 replaced under its key and not counted missed: \(cluster.diagnostics())")
    }

    @Test("[5.5-3] a device connecting to g2 while connected to g1: g1 sends GOAWAY REPLACED, g2's connection works")
    func replacedAcrossNodes() throws {
        let cluster = try startCluster(devices: [ClusterDevice("phone")])
        let onA = try cluster.connectDevice("phone", to: 0)
        try cluster.waitUntilEveryNodeRoutes(to: "phone")
        #expect(onA.drain() == [], "the probes acknowledged, or they would count as missed on g2")
        let onB = try cluster.connectDevice("phone", to: 1)
        #expect(try onA.nextFrame() == .goaway(.replaced), "\(cluster.diagnostics())")
        #expect(onA.waitForClose())
        #expect(waitUntil { cluster.metric(0, "securepush_gateway_cluster_replaced_elsewhere_total") == 1 })
        // Every node now routes to g2: a push via g1 and one via g3 reach the new connection.
        try cluster.waitUntilRoutes(to: "phone", via: 0)
        try cluster.waitUntilRoutes(to: "phone", via: 2)
        #expect(try cluster.provider(via: 0).push(.device("phone"), id: "after-a") == PushAck(written: 1, queued: 0))
        #expect(try cluster.provider(via: 2).push(.device("phone"), id: "after-c") == PushAck(written: 1, queued: 0))
        #expect(onB.drain() == [.push("after-a"), .push("after-c")])
    }
}
