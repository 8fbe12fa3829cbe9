import Testing
import PushClient
import PushGateway
import PushTestSupport
import PushWire

/// Cluster nodes on two loop threads each (issue 25): every loop is a member of the
/// cluster with its own NATS connection and holds the devices whose id hashes to it. A
/// PUSH reaches the node's other loop inside the process and the other node's loops over
/// NATS, and its PUSH_ACK sums them all. Each test checks that its devices really live on
/// both loops of a node.
@Suite("Cluster nodes on two loops each, every part a process", .ownThread, .serialized, .enabled(if: NATSServer.testsEnabled))
struct ClusterLoopsProcessTests {
    static let loops = 2

    /// `count` device ids for each loop of a node, in loop order.
    static func ids(_ prefix: String, perLoop count: Int) -> [[String]] {
        var byLoop = Array(repeating: [String](), count: loops)
        var serial = 0
        while byLoop.contains(where: { $0.count < count }) {
            let id = "\(prefix)\(serial)"
            serial += 1
            let home = LoopPlacement.home(of: id, count: loops)
            if byLoop[home].count < count { byLoop[home].append(id) }
        }
        return byLoop
    }

    @Test("[4.13-3] pushes via either node reach devices on both loops of both nodes; PUSH_ACK sums loops and nodes")
    func pushesAcrossLoopsAndNodes() throws {
        // Per node, a device homed on each loop.
        let onNode = [Self.ids("a", perLoop: 1).flatMap { $0 }, Self.ids("b", perLoop: 1).flatMap { $0 }]
        let all = onNode.flatMap { $0 }
        let cluster = try startCluster(nodes: 2, loops: Self.loops, devices: all.map { ClusterDevice($0, tags: ["news"]) })
        for node in 0..<2 {
            #expect(cluster.metric(node, "securepush_gateway_cluster_nats_connected") == Double(Self.loops), "one NATS connection per loop")
            #expect(cluster.metric(node, "securepush_gateway_cluster_nodes") == 2, "a node of two loops counts once")
        }
        var clients: [String: BlockingWireClient] = [:]
        for node in 0..<2 { for id in onNode[node] { clients[id] = try cluster.connectDevice(id, to: node) } }
        for id in all { try cluster.waitUntilEveryNodeRoutes(to: id) }

        for via in 0..<2 {
            let provider = try cluster.provider(via: via)
            for id in all {
                let push = "\(id)-via-g\(via + 1)"
                #expect(try provider.push(.device(id), id: push) == PushAck(written: 1, queued: 0), "\(cluster.diagnostics())")
                #expect(try clients[id]?.nextFrame() == .push(push))
            }
            let everyone = "user-via-g\(via + 1)"
            #expect(try provider.push(.user("alice"), id: everyone) == PushAck(written: 4, queued: 0), "\(cluster.diagnostics())")
            let news = "tag-via-g\(via + 1)"
            #expect(try provider.push(.tag("news"), id: news) == PushAck(written: 4, queued: 0))
            for id in all { #expect(clients[id]?.drain() == [.push(everyone), .push(news)], "\(id) got each once") }
        }
    }

    @Test("[4.13-7] offline devices homed on both loops: pushes queued in JetStream by either loop follow them to the other node")
    func queuesFromBothLoops() throws {
        let phones = Self.ids("phone", perLoop: 1).flatMap { $0 }
        let cluster = try startCluster(nodes: 2, loops: Self.loops, users: ["alice", "bob"],
                                       devices: phones.map { ClusterDevice($0, user: "bob") })
        for id in phones {
            let client = try cluster.connectDevice(id, to: 0)
            try cluster.waitUntilEveryNodeRoutes(to: id)
            #expect(client.drain() == [], "the probes acknowledged")
            client.shutdownWrite()
            #expect(client.waitForClose())
        }
        #expect(waitUntil { cluster.metric(0, "securepush_gateway_devices_online") == 0 })

        for via in 0..<2 {
            let ack = try cluster.provider(via: via).push(.user("bob"), id: "for-bob-\(via + 1)")
            #expect(ack == PushAck(written: 0, queued: 2), "one queued per device, whichever loop holds it: \(cluster.diagnostics())")
        }
        for id in phones {
            let again = try cluster.connectDevice(id, to: 1)
            #expect(again.drain(quietMs: 1_500) == [.push("for-bob-1"), .push("for-bob-2")], "\(id): \(cluster.diagnostics())")
        }
        #expect(cluster.metric(1, "securepush_gateway_cluster_queues_taken_total") == 2)
    }

    @Test("[5.5-3] a device on either loop of g1 connecting to g2 ends its g1 connection with GOAWAY REPLACED")
    func replacedFromBothLoops() throws {
        let phones = Self.ids("phone", perLoop: 1).flatMap { $0 }
        let cluster = try startCluster(nodes: 2, loops: Self.loops, devices: phones.map { ClusterDevice($0) })
        for id in phones {
            let first = try cluster.connectDevice(id, to: 0)
            try cluster.waitUntilEveryNodeRoutes(to: id)
            #expect(first.drain() == [])
            let second = try cluster.connectDevice(id, to: 1)
            #expect(try first.nextFrame() == .goaway(.replaced), "\(id): \(cluster.diagnostics())")
            try cluster.waitUntilRoutes(to: id, via: 0)
            #expect(try cluster.provider(via: 0).push(.device(id), id: "after-\(id)") == PushAck(written: 1, queued: 0))
            #expect(second.drain() == [.push("after-\(id)")])
        }
        #expect(waitUntil { cluster.metric(0, "securepush_gateway_cluster_replaced_elsewhere_total") == 2 })
    }
}
