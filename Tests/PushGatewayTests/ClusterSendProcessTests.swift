import Foundation
import Testing
import PushClient
import PushTestSupport
import PushWire

/// A store handing SENDs' pushes to a gateway cluster (SPEC.md 4.17-3, 4.17-4, 4.17-8):
/// the node it forwards to is SIGKILLed while SENDs flow.
@Suite("SEND into a gateway cluster, as processes", .ownThread, .serialized, .enabled(if: NATSServer.testsEnabled))
struct ClusterSendProcessTests {
    @Test("[4.17-4] [4.17-8] the node a store forwards to is SIGKILLed while SENDs flow: the store goes on through another node, and every acknowledged SEND reaches each device once")
    func forwardingNodeKilled() throws {
        let devices = [ClusterDevice("phone", user: "alice"), ClusterDevice("tablet", user: "alice")]
        let cluster = try GatewayClusterHarness(nodes: 3, devices: devices, storeForwards: true)
        try cluster.waitUntilFormed()
        // On the nodes that live: the store's first address is node 0's, the victim.
        let phone = try cluster.connectDevice("phone", to: 1)
        let tablet = try cluster.connectDevice("tablet", to: 2)
        for device in devices { try cluster.waitUntilEveryNodeRoutes(to: device.id) }
        #expect(try waitUntil { cluster.store.metric("securepush_store_outbox_gateway_link_up") == 1 })

        let provider = try cluster.deployment.provider(store: cluster.store.port)
        var sent: Set<[UInt8]> = []
        for batch in 0..<6 {
            if batch == 2 { cluster.kill(0) }
            let requests = try (0..<10).map { index in
                try provider.send(.send(SendRequest(user: "alice", payload: Array("send \(batch)-\(index)".utf8))))
            }
            for correlation in requests {
                guard case .sendOK(let ok) = try provider.reply(to: correlation) else { Issue.record("a SEND failed"); return }
                sent.insert(ok.id.bytes)
            }
        }
        #expect(sent.count == 60)

        for (name, device) in [("phone", phone), ("tablet", tablet)] {
            var received: [[UInt8]] = []
            while Set(received) != sent {
                guard let (header, message) = try? device.receive(timeoutMs: 30_000) else { break }
                guard case .push(let push) = message else { continue }
                _ = try device.send(.deliveryAck(DeliveryAck(id: push.id)), correlation: header.correlation)
                // The routing probes of waitUntilEveryNodeRoutes come too.
                if sent.contains(push.id) { received.append(push.id) }
            }
            #expect(Set(received) == sent, "\(name): \(sent.subtracting(received).count) of \(sent.count) missing\n\(cluster.diagnostics())")
            #expect(received.count == Set(received).count, "\(name) got a push twice")
            #expect(try device.request(.ping) == .pong)
            if let (_, message) = try? device.receive(timeoutMs: 1), case .push(let push) = message {
                #expect(!sent.contains(push.id), "\(name): a push came again")
            }
        }
        #expect(try waitUntil { cluster.store.metric("securepush_store_outbox_depth") == 0 })
        #expect(cluster.store.metric("securepush_store_outbox_forwarded_total") == 60)
    }
}
