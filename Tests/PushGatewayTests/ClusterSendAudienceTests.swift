import Foundation
import Testing
import PushClient
import PushTestSupport
import PushWire

/// A SEND to one device whose push goes through a gateway cluster node: what the user's
/// other devices SYNC from the store afterwards (SPEC.md 4.9-4).
@Suite("SEND to one device through a gateway cluster: what SYNC shows", .ownThread, .serialized, .enabled(if: NATSServer.testsEnabled))
struct ClusterSendAudienceTests {
    @Test("[4.9-4] [4.9-1] [4.17-3] a SEND to device decoy reaches decoy through a cluster node; alice's other device, connecting afterwards, and a device enrolled afterwards do not SYNC it and may not FETCH it")
    func deviceTargetThroughCluster() throws {
        let devices = [ClusterDevice("decoy", user: "alice"), ClusterDevice("phone", user: "alice", tags: ["work"])]
        let cluster = try GatewayClusterHarness(nodes: 2, devices: devices, storeForwards: true)
        try cluster.waitUntilFormed()
        // On node 1: the store forwards to node 0, which hands the push over to node 1.
        let decoy = try cluster.connectDevice("decoy", to: 1)
        try cluster.waitUntilEveryNodeRoutes(to: "decoy")
        #expect(waitUntil { cluster.store.metric("securepush_store_outbox_gateway_link_up") == 1 })

        let provider = try cluster.deployment.provider(store: cluster.store.port)
        func send(_ text: String, to target: PushTarget?) throws -> PayloadID {
            let reply = try provider.request(.send(SendRequest(user: "alice", payload: Array(text.utf8), target: target)))
            guard case .sendOK(let ok) = reply else { throw ServiceError.failed("SEND refused: \(reply)") }
            return ok.id
        }
        let code = try send("your code is 1234", to: .device("decoy"))
        var pushed = false
        while !pushed, let (header, message) = try? decoy.receive(timeoutMs: 20_000) {
            guard case .push(let push) = message else { continue }
            _ = try decoy.send(.deliveryAck(DeliveryAck(id: push.id)), correlation: header.correlation)
            // The routing probes of waitUntilEveryNodeRoutes come too.
            pushed = push.id == code.bytes
        }
        #expect(pushed, "decoy got its push through the cluster\n\(cluster.diagnostics())")
        let everyone = try send("for every device", to: nil)
        // Enrolled only now, with the tag phone has.
        try cluster.enroll(ClusterDevice("laptop", user: "alice", tags: ["work"]))

        let store = try BlockingWireClient(host: "127.0.0.1", port: cluster.store.port, timeoutMs: 10_000)
        guard case .helloOK = try store.hello(Hello(role: .device)) else { Issue.record("device HELLO at the store"); return }
        func listed(by device: String) throws -> (ids: [PayloadID], token: [UInt8]) {
            let login = try store.request(.login(Login(user: "alice", password: Array("alice-pw".utf8), deviceID: device)))
            guard case .loginOK(let ok) = login else { throw ServiceError.failed("LOGIN of \(device): \(login)") }
            guard case .syncOK(let page) = try store.request(.sync(Sync(token: ok.token))) else { throw ServiceError.failed("SYNC of \(device)") }
            return (page.ids, ok.token)
        }
        #expect(try listed(by: "decoy").ids == [everyone, code])
        for device in ["phone", "laptop"] {
            let (ids, token) = try listed(by: device)
            #expect(ids == [everyone], "\(device) lists only what was pushed to it")
            #expect(errorStatus(try store.request(.fetch(Fetch(id: code, token: token)))) == .forbidden, "\(device) reads decoy's code")
        }
    }
}
