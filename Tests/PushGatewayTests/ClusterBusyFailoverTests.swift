import Foundation
import Testing
import PushClient
import PushTestSupport
import PushWire

/// A store given every node's address, and the node it forwards to cut off from NATS alone
/// (its link to the nats-server goes through a relay the test cuts): the node answers the
/// push of a SEND BUSY ([4.13-13]) and the store hands it to the other node, which reaches
/// the device, while the first is still cut off ([4.17-4]). In the suite of the other
/// cut-off tests, which stop and start processes of their own.
extension ClusterCutOffPushTests {
    /// The node the store's forwarder connected to last, from its log.
    static func storeGateway(of cluster: GatewayClusterHarness) -> Int? {
        let line = cluster.store.standardErrorText().split(separator: "\n").last { $0.contains("connected to a gateway") }
        guard let line else { return nil }
        return cluster.liveIndices.first { index in
            (try? cluster.node(index)).map { line.contains("gateway=127.0.0.1:\($0.port) ") } ?? false
        }
    }

    @Test("[4.13-13] [4.17-4] a store given both nodes: the push of a SEND that its node, cut off from NATS alone, answers BUSY goes through the other node, which reaches the device, while the first is still cut off")
    func storeMovesOnAfterBusy() throws {
        let cluster = try GatewayClusterHarness(nodes: 2, devices: [ClusterDevice("phone")], storeForwards: true, natsRelayed: [0, 1])
        try cluster.waitUntilFormed()
        #expect(try waitUntil { cluster.store.metric("securepush_store_outbox_gateway_link_up") == 1 })
        // Whichever node the store reached first is cut off; the device is on the other.
        guard let cut = Self.storeGateway(of: cluster) else {
            throw ServiceError.failed("the store's log names no node it connected to:\n\(cluster.store.standardErrorText())")
        }
        let other = 1 - cut
        let phone = try cluster.connectDevice("phone", to: other)
        try cluster.waitUntilEveryNodeRoutes(to: "phone")

        cluster.natsRelays[cut]?.cut()
        #expect(waitUntil(timeoutSeconds: 10, pollMilliseconds: 50) { !cluster.isReady(cut) }, "\(cluster.diagnostics())")
        #expect(cluster.isReady(other), "the other node keeps its link to NATS")
        let provider = try cluster.deployment.provider(store: cluster.store.port)
        let sentAt = ContinuousClock.now
        let reply = try provider.request(.send(SendRequest(user: "alice", payload: Array("around the cut".utf8), target: .device("phone"))))
        guard case .sendOK(let ok) = reply else { throw ServiceError.failed("SEND refused: \(reply)") }
        let id = String(decoding: ok.id.bytes, as: UTF8.self)

        #expect(try phone.nextFrame(timeoutMs: 10_000) == .push(id), "\(cluster.diagnostics())\n--- store ---\n\(cluster.store.standardErrorText().suffix(3_000))")
        print("SEND to push on the device around the cut node: \(sentAt.duration(to: .now))")
        #expect(!cluster.isReady(cut), "delivered while the first node was still cut off")
        #expect(try waitUntil { cluster.store.metric("securepush_store_outbox_depth") == 0 })
        #expect(cluster.store.metric("securepush_store_outbox_forwarded_total") == 1)
        #expect((cluster.store.metric("securepush_store_outbox_retries_total") ?? 0) >= 1, "answered BUSY first")
        #expect(cluster.store.metric("securepush_store_outbox_busy_moves_total") == 1)
        #expect(Self.storeGateway(of: cluster) == other)
        let moved = cluster.store.standardErrorText().split(separator: "\n").filter { $0.contains("answered a SEND's push BUSY") }
        #expect(moved.count == 1 && moved.allSatisfy { $0.contains(" info ") }, "logged once, at info: \(moved)")
        #expect((cluster.metric(cut, "securepush_gateway_cluster_pushes_unreached_total") ?? 0) >= 1, "the cut node did answer BUSY")
        #expect(phone.drain().isEmpty, "delivered once")
    }
}

extension ClusterCutOffPushTests {
    @Test("[4.13-13] [4.17-4] every node cut off: the store goes round its nodes more and more slowly instead of flapping, keeps the push, and hands it over once NATS is back")
    func storePausesWhenEveryNodeIsBusy() throws {
        // The device is offline: its queue is in JetStream, which neither node reaches.
        let cluster = try GatewayClusterHarness(nodes: 2, devices: [ClusterDevice("away")], storeForwards: true)
        try cluster.waitUntilFormed()
        #expect(try waitUntil { cluster.store.metric("securepush_store_outbox_gateway_link_up") == 1 })

        cluster.nats.stop()
        #expect(waitUntil(timeoutSeconds: 10, pollMilliseconds: 50) { !cluster.isReady(0) && !cluster.isReady(1) }, "\(cluster.diagnostics())")
        let provider = try cluster.deployment.provider(store: cluster.store.port)
        let reply = try provider.request(.send(SendRequest(user: "alice", payload: Array("nowhere to go".utf8), target: .device("away"))))
        guard case .sendOK = reply else { throw ServiceError.failed("SEND refused: \(reply)") }
        Thread.sleep(forTimeInterval: 6)
        // Pauses of 1, 2 and 4 s per node: about 6 moves in 6 s (without them, one per round trip).
        let moves = cluster.store.metric("securepush_store_outbox_busy_moves_total") ?? 0
        print("every node BUSY for 6 s: \(Int(moves)) moves")
        #expect(moves >= 2 && moves <= 8, "moved on \(moves) times in 6 s")
        #expect(cluster.store.metric("securepush_store_outbox_depth") == 1, "the push is still in the outbox")
        let logged = cluster.store.standardErrorText().split(separator: "\n").filter { $0.contains("answered a SEND's push BUSY") }
        #expect(logged.count == 1, "logged at most once a minute: \(logged.count)")

        try cluster.nats.restart()
        try cluster.waitUntilFormed()
        #expect(waitUntil(timeoutSeconds: 20, pollMilliseconds: 100) { cluster.store.metric("securepush_store_outbox_depth") == 0 },
                "\(cluster.diagnostics())")
        #expect(cluster.store.metric("securepush_store_outbox_forwarded_total") == 1)
    }
}
