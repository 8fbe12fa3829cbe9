import Foundation
import Testing
import PushClient
import PushGateway
import PushTestSupport
import PushWire

/// What grows with a cluster's members (issue 25): each loop of a node is a member with a
/// NATS connection of its own, but the node sends one heartbeat for all of them
/// (CLUSTER.md, "One heartbeat per node"), and a device's presence goes to its home member
/// of each node ("Presence by bucket"). The nats-server's monitoring endpoint counts what
/// travels.
@Suite("Cluster heartbeats per node and presence per home member, every part a process", .ownThread, .serialized, .enabled(if: NATSServer.testsEnabled))
struct ClusterMemberScalingTests {
    /// The nats-server's counters (/varz), and each connection's published messages by name (/connz).
    struct NATSCounts {
        var inMsgs: Double
        var outMsgs: Double
        var publishedBy: [String: Double]
        /// Presence messages NATS delivered to each connection, by name.
        var presenceTo: [String: Double]

        init(_ nats: NATSServer) throws {
            let varz = try Self.json(nats, "/varz")
            inMsgs = (varz["in_msgs"] as? NSNumber)?.doubleValue ?? -1
            outMsgs = (varz["out_msgs"] as? NSNumber)?.doubleValue ?? -1
            let connz = try Self.json(nats, "/connz?limit=1024&subs=detail")
            publishedBy = [:]
            presenceTo = [:]
            for connection in connz["connections"] as? [[String: Any]] ?? [] {
                guard let name = connection["name"] as? String else { continue }
                publishedBy[name] = (connection["in_msgs"] as? NSNumber)?.doubleValue ?? -1
                for subscription in connection["subscriptions_list_detail"] as? [[String: Any]] ?? [] {
                    guard (subscription["subject"] as? String)?.hasPrefix("securepush.presence") == true else { continue }
                    presenceTo[name, default: 0] += (subscription["msgs"] as? NSNumber)?.doubleValue ?? 0
                }
            }
        }

        static func json(_ nats: NATSServer, _ path: String) throws -> [String: Any] {
            // HTTPGet's HTTP/1.1 request leaves nats-server's connection open for seconds:
            // this one asks it to close, so the counters are read when asked for.
            let client = try BlockingWireClient(host: "127.0.0.1", port: nats.monitorPort)
            try client.sendRaw(Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8))
            let response = client.readAll()
            guard let end = response.range(of: "\r\n\r\n") else { throw ServiceError.failed("no HTTP response head: \(response)") }
            let chunked = response[..<end.lowerBound].lowercased().contains("transfer-encoding: chunked")
            let rest = String(response[end.upperBound...])
            let body = chunked ? dechunked(rest) : rest
            return try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any] ?? [:]
        }

        /// An HTTP/1.1 chunked body's data.
        static func dechunked(_ body: String) -> String {
            var bytes = Array(body.utf8)[...]
            var out: [UInt8] = []
            while let lineEnd = bytes.firstIndex(of: UInt8(ascii: "\r")),
                  let size = Int(String(decoding: bytes[bytes.startIndex..<lineEnd], as: UTF8.self), radix: 16), size > 0 {
                let start = lineEnd + 2
                guard start + size <= bytes.endIndex else { break }
                out += bytes[start..<start + size]
                bytes = bytes[min(bytes.endIndex, start + size + 2)...]
            }
            return String(decoding: out, as: UTF8.self)
        }
    }

    /// Messages a second through the nats-server over `seconds` of an idle cluster that formed.
    static func idleRates(_ cluster: GatewayClusterHarness, seconds: Double = 5) throws -> (published: Double, delivered: Double, before: NATSCounts, after: NATSCounts) {
        // Presence asked and answered at start-up is over by now.
        Thread.sleep(forTimeInterval: 2)
        let before = try NATSCounts(cluster.nats)
        Thread.sleep(forTimeInterval: seconds)
        let after = try NATSCounts(cluster.nats)
        return ((after.inMsgs - before.inMsgs) / seconds, (after.outMsgs - before.outMsgs) / seconds, before, after)
    }

    @Test("an idle cluster's NATS messages grow with nodes × members, not members²: 2 nodes × 4 loops and 1 node × 8 loops",
          arguments: [(2, 4), (1, 8)])
    func heartbeatDeliveries(nodes: Int, loops: Int) throws {
        let cluster = try startCluster(nodes: nodes, loops: loops, devices: [])
        let members = Double(nodes * loops)
        let rates = try Self.idleRates(cluster)
        print("NATS messages/s, idle cluster of \(nodes) node(s) × \(loops) loops: published \(rates.published), delivered \(rates.delivered)")
        // One heartbeat a node a second, to every other member (a NATS connection is not
        // sent its own messages); one per member was members × (members − 1).
        #expect(rates.published <= Double(nodes) + 1, "\(rates.published) published/s")
        #expect(rates.delivered <= Double(nodes) * members + 4,
                "\(rates.delivered) delivered/s; per-member heartbeats deliver \(members * (members - 1))")
        #expect(cluster.liveIndices.allSatisfy { cluster.isReady($0) })
    }

    @Test("2 nodes of 2 loops: the cluster forms, delivers across nodes, only loop 0 sends heartbeats, a killed node is dropped within the timeout")
    func twoNodesOfTwoLoops() throws {
        let ids = ClusterLoopsProcessTests.ids("phone", perLoop: 1).flatMap { $0 }
        let cluster = try startCluster(nodes: 2, loops: 2, devices: ids.map { ClusterDevice($0) })
        // Devices on both loops of g2, pushed via g1.
        var clients: [String: BlockingWireClient] = [:]
        for id in ids {
            clients[id] = try cluster.connectDevice(id, to: 1)
            try cluster.waitUntilEveryNodeRoutes(to: id)
            #expect(clients[id]?.drain() == [], "the probes acknowledged")
        }
        for id in ids {
            #expect(try cluster.provider(via: 0).push(.device(id), id: "to-\(id)") == PushAck(written: 1, queued: 0), "\(cluster.diagnostics())")
            #expect(try clients[id]?.nextFrame() == .push("to-\(id)"))
        }

        // Idle, each node's loop 1 publishes nothing: its node's heartbeat speaks for it.
        let rates = try Self.idleRates(cluster, seconds: 3)
        for name in ["g1", "g2"] {
            let loop1 = "securepush-gateway-\(name)~1"
            let published = (rates.after.publishedBy[loop1] ?? -1) - (rates.before.publishedBy[loop1] ?? 0)
            #expect(published == 0, "\(loop1) published \(published) in 3 s: \(rates.after.publishedBy)")
            let loop0 = "securepush-gateway-\(name)"
            let beats = (rates.after.publishedBy[loop0] ?? 0) - (rates.before.publishedBy[loop0] ?? 0)
            #expect((2...4).contains(beats), "\(loop0) published \(beats) heartbeats in 3 s: \(rates.before.publishedBy) then \(rates.after.publishedBy)")
        }

        // Killed, g2 and both its loops are dropped within the node timeout (3 s) and a beat.
        cluster.kill(1)
        let start = Date()
        #expect(waitUntil(timeoutSeconds: 6) { cluster.metric(0, "securepush_gateway_cluster_nodes") == 1 }, "\(cluster.diagnostics())")
        #expect(Date().timeIntervalSince(start) < 5)
        for id in ids {
            // Both of g2's members taken for dead: queued, not forwarded to a dead node.
            let ack = try cluster.provider(via: 0).push(.device(id), id: "after-kill-\(id)")
            #expect(ack == PushAck(written: 0, queued: 1), "\(id): \(cluster.diagnostics())")
        }
    }

    @Test("2 nodes × 4 loops: a device's connect reaches one member of the other node (its home there), not every member")
    func presenceToTheHomeMember() throws {
        var byLoop = Array(repeating: [String](), count: 4)
        var serial = 0
        while byLoop.contains(where: { $0.count < 2 }) {
            let id = "phone\(serial)"
            serial += 1
            let home = LoopPlacement.home(of: id, count: 4)
            if byLoop[home].count < 2 { byLoop[home].append(id) }
        }
        let ids = byLoop.flatMap { $0 }
        let cluster = try startCluster(nodes: 2, loops: 4, devices: ids.map { ClusterDevice($0) })
        let before = try NATSCounts(cluster.nats)
        var clients: [BlockingWireClient] = []
        for id in ids {
            clients.append(try cluster.connectDevice(id, to: 0))
            try cluster.waitUntilEveryNodeRoutes(to: id)
        }
        let after = try NATSCounts(cluster.nats)
        var delivered: [String: Double] = [:]
        for (name, count) in after.presenceTo { delivered[name] = count - (before.presenceTo[name] ?? 0) }
        // One batch per connect, each to the member of g2 that is the device's home there:
        // every member of g2 holds two of the eight. To every member but the sender, it was 56.
        #expect(delivered.values.reduce(0, +) == Double(ids.count), "\(delivered)")
        for loop in 1..<4 { #expect(delivered["securepush-gateway-g2~\(loop)"] == 2, "\(delivered)") }
        #expect(delivered["securepush-gateway-g2"] == 2, "\(delivered)")
        for client in clients { #expect(client.drain() == [], "the probes acknowledged") }
    }
}
