import Foundation
import Testing
import PushClient
import PushTestSupport
import PushWire

/// The store's registry as every node of a cluster follows it (issue 15, item 6).
@Suite("A three-node gateway cluster following the store's registry", .ownThread, .serialized, .enabled(if: NATSServer.testsEnabled))
struct ClusterProcessRegistryTests {
    @Test("[7.4-6] a revocation closes the device's connection on whichever node holds it, and every node refuses it after")
    func revocationReachesEveryNode() throws {
        let cluster = try startCluster(devices: [ClusterDevice("phone")])
        let onC = try cluster.connectDevice("phone", to: 2)
        try cluster.deployment.revoke("phone")
        #expect(try onC.nextFrame(timeoutMs: 8_000) == .goaway(.revoked))
        let credential = try cluster.registration("phone")
        for index in 0..<3 {
            let refused = waitUntil(timeoutSeconds: 8) {
                guard let client = try? cluster.node(index).connect() else { return false }
                return (try? client.hello(Hello(role: .device, credential: credential)))
                    == .error(ErrorReply(status: .badCredentials, message: "registration revoked"))
            }
            #expect(refused, "g\(index + 1) refuses the revoked registration")
        }
    }

    @Test("[4.14-9] a revocation discards the pushes queued in JetStream for the device: enrolled again, it gets none of them")
    func revocationDiscardsQueue() throws {
        let cluster = try startCluster(devices: [ClusterDevice("phone")])
        #expect(try cluster.provider(via: 0).push(.device("phone"), id: "before-revocation") == PushAck(written: 0, queued: 1))
        try cluster.deployment.revoke("phone")
        #expect(waitUntil(timeoutSeconds: 8) {
            (0..<3).allSatisfy { cluster.metric($0, "securepush_gateway_registry_entries", labels: "state=\"revoked\"") == 1 }
        })
        try cluster.enroll(ClusterDevice("phone"))
        let again = try cluster.connectDevice("phone", to: 1)
        let frames = again.drain(quietMs: 1_500)
        #expect(frames == [], "discarded with the revocation, as on one node: \(cluster.diagnostics())")
    }
}
