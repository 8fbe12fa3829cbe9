import Foundation
import Testing
import PushClient
import PushTestSupport
import PushWire

/// SPEC.md 4.13-13: a node that cannot reach NATS answers BUSY to a PUSH for devices only
/// the cluster could reach, after delivering it to its own; a store forwarding a SEND
/// keeps the push and sends it again until a node can deliver it ([4.17-4]).
@Suite("A push through a node cut off from NATS", .ownThread, .serialized, .enabled(if: NATSServer.testsEnabled))
struct ClusterCutOffPushTests {
    /// A PUSH's reply: its counts, or the status of its ERROR.
    enum Reply: Equatable {
        case ack(PushAck)
        case error(Status)
    }

    static func push(_ provider: BlockingWireClient, _ target: PushTarget, id: String, ttl: UInt32 = 600) throws -> Reply {
        let reply = try provider.request(.push(Push(target: target, id: Array(id.utf8), ttlSeconds: ttl)), timeoutMs: 10_000)
        switch reply {
        case .pushAck(let ack): return .ack(ack)
        case .error(let error): return .error(error.status)
        default: throw ServiceError.failed("PUSH \(id): unexpected reply \(reply)")
        }
    }

    @Test("[4.13-13] nats-server stopped: a PUSH for a device on another node, or for an offline one, is answered BUSY; one matching a device here too reaches it and is answered BUSY; one for devices here only gets PUSH_ACK")
    func pushRefusedWhileCutOff() throws {
        let devices = [ClusterDevice("here"), ClusterDevice("there"), ClusterDevice("away")]
        let cluster = try startCluster(nodes: 2, devices: devices)
        let here = try cluster.connectDevice("here", to: 0)
        let there = try cluster.connectDevice("there", to: 1)
        for device in ["here", "there"] { try cluster.waitUntilEveryNodeRoutes(to: device) }
        let provider = try cluster.provider(via: 0)
        #expect(try Self.push(provider, .device("there"), id: "linked") == .ack(PushAck(written: 1, queued: 0)))
        #expect(try there.nextFrame() == .push("linked"))

        cluster.nats.stop()
        #expect(waitUntil(timeoutSeconds: 10, pollMilliseconds: 50) { !cluster.isReady(0) }, "\(cluster.diagnostics())")
        #expect(try Self.push(provider, .device("there"), id: "to-there") == .error(.busy))
        #expect(try Self.push(provider, .device("away"), id: "to-away") == .error(.busy), "an offline device's queue is in JetStream")
        #expect(try Self.push(provider, .user("alice"), id: "to-all") == .error(.busy))
        #expect(try here.nextFrame() == .push("to-all"), "the device here has it all the same")
        #expect(try Self.push(provider, .device("here"), id: "to-here") == .ack(PushAck(written: 1, queued: 0)))
        #expect(try here.nextFrame() == .push("to-here"))
        #expect(there.drain().isEmpty)
        #expect((cluster.metric(0, "securepush_gateway_cluster_pushes_unreached_total") ?? 0) >= 4)

        try cluster.nats.restart()
        try cluster.waitUntilFormed()
        try cluster.waitUntilEveryNodeRoutes(to: "there")
        // The provider's retry, once NATS is back.
        #expect(try Self.push(provider, .device("there"), id: "to-there") == .ack(PushAck(written: 1, queued: 0)))
        #expect(try there.nextFrame() == .push("to-there"))
    }

    @Test("[4.13-13] [4.17-4] a SEND whose push the store, given one gateway address, hands to a node cut off from NATS, for a device on another node: answered BUSY, kept, sent again to the same node, and delivered once NATS is back")
    func storeRetriesThroughCutOffNode() throws {
        let cluster = try GatewayClusterHarness(nodes: 2, devices: [ClusterDevice("there")], storeForwards: true, storeGateways: [0])
        try cluster.waitUntilFormed()
        // The store forwards to node 0 only; the device is on node 1.
        let there = try cluster.connectDevice("there", to: 1)
        try cluster.waitUntilEveryNodeRoutes(to: "there")
        #expect(try waitUntil { cluster.store.metric("securepush_store_outbox_gateway_link_up") == 1 })

        cluster.nats.stop()
        #expect(waitUntil(timeoutSeconds: 10, pollMilliseconds: 50) { !cluster.isReady(0) }, "\(cluster.diagnostics())")
        let provider = try cluster.deployment.provider(store: cluster.store.port)
        let reply = try provider.request(.send(SendRequest(user: "alice", payload: Array("while cut off".utf8), target: .device("there"))))
        guard case .sendOK(let ok) = reply else { throw ServiceError.failed("SEND refused: \(reply)") }
        let id = String(decoding: ok.id.bytes, as: UTF8.self)
        #expect(waitUntil(timeoutSeconds: 10, pollMilliseconds: 100) {
            (cluster.store.metric("securepush_store_outbox_retries_total") ?? 0) >= 2
        }, "the store was told to retry, more than once")
        #expect(cluster.store.metric("securepush_store_outbox_forwarded_total") ?? 0 == 0)
        #expect(cluster.store.metric("securepush_store_outbox_depth") == 1, "the push is still in the outbox")
        #expect(cluster.store.metric("securepush_store_outbox_busy_moves_total") == 0, "one address: nowhere to move on to")

        try cluster.nats.restart()
        try cluster.waitUntilFormed()
        #expect(try there.nextFrame(timeoutMs: 20_000) == .push(id), "\(cluster.diagnostics())")
        #expect(try waitUntil { cluster.store.metric("securepush_store_outbox_depth") == 0 })
        #expect(cluster.store.metric("securepush_store_outbox_forwarded_total") == 1)
        #expect(there.drain().isEmpty, "delivered once")
    }
}

extension ClusterCutOffPushTests {
    @Test("[4.13-13] nodes of two loops: every PUSH for devices on the other node is answered BUSY, whichever loop holds the device, and PUSH_ACK once NATS is back")
    func busyAcrossLoops() throws {
        let remote = (0..<6).map { ClusterDevice("r\($0)") }
        let cluster = try startCluster(nodes: 2, loops: 2, devices: remote)
        var clients: [BlockingWireClient] = []
        for device in remote { clients.append(try cluster.connectDevice(device.id, to: 1)) }
        for device in remote { try cluster.waitUntilRoutes(to: device.id, via: 0) }
        let provider = try cluster.provider(via: 0)

        cluster.nats.stop()
        #expect(waitUntil(timeoutSeconds: 10, pollMilliseconds: 50) { !cluster.isReady(0) }, "\(cluster.diagnostics())")
        #expect(try Self.push(provider, .user("alice"), id: "everyone") == .error(.busy))
        for device in remote {
            #expect(try Self.push(provider, .device(device.id), id: "one-\(device.id)") == .error(.busy), "\(device.id)")
        }

        try cluster.nats.restart()
        try cluster.waitUntilFormed()
        for device in remote { try cluster.waitUntilRoutes(to: device.id, via: 0) }
        #expect(try Self.push(provider, .user("alice"), id: "everyone") == .ack(PushAck(written: 6, queued: 0)))
        for client in clients { #expect(try client.nextFrame() == .push("everyone")) }
    }
}
