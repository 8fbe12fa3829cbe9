import Foundation
import Testing
import PushClient
import PushTestSupport
import PushWire

/// What a node holds for a device when the device leaves it, by a node shutting down or by
/// connecting elsewhere: the unacknowledged pushes go back to its queue in JetStream
/// ([4.14-7]) and come to the node it connects to next.
@Suite("A three-node gateway cluster: pushes handed over between nodes", .serialized, .enabled(if: NATSServer.testsEnabled))
struct ClusterProcessHandoverTests {
    @Test("[4.14-7] SIGTERM of a node: its devices' unacknowledged pushes reach them on another node, in the order written")
    func drainHandsOver() throws {
        let cluster = try startCluster(devices: [ClusterDevice("phone")])
        let onA = try cluster.connectDevice("phone", to: 0)
        try cluster.waitUntilEveryNodeRoutes(to: "phone")
        #expect(onA.drain() == [])
        let provider = try cluster.provider(via: 1)
        for id in ["p1", "p2", "p3"] { #expect(try provider.push(.device("phone"), id: id) == PushAck(written: 1, queued: 0)) }
        #expect(onA.drain(acknowledge: false) == [.push("p1"), .push("p2"), .push("p3")], "written, not acknowledged")

        let node = try cluster.node(0)
        node.child.signal(SIGTERM)
        #expect(node.child.wait(seconds: 15) == 0, "a clean stop: \(node.standardErrorText().suffix(800))")
        #expect(onA.drain(acknowledge: false).last == .goaway(.shuttingDown))
        let onC = try cluster.connectDevice("phone", to: 2)
        #expect(onC.drain(quietMs: 1_500) == [.push("p1"), .push("p2"), .push("p3")], "\(cluster.diagnostics())")
    }

    /// [4.14-8] on one node: MISSED, then the pushes put back, then the rest. In the
    /// cluster the pushes put back on the old node reach the new one through JetStream
    /// after HELLO_OK, so a push that arrives meanwhile is written first, and MISSED comes
    /// after it. Recorded as a known issue until the new node holds a device's writes until
    /// the old node has handed over (see the cluster-tests report).
    @Test("[4.14-8] after a move, MISSED and the pushes put back come before a push that arrived after HELLO_OK")
    func orderAfterMove() throws {
        let cluster = try startCluster(devices: [ClusterDevice("phone")], gatewayArguments: ["--queue-capacity", "2"])
        let onA = try cluster.connectDevice("phone", to: 0)
        try cluster.waitUntilEveryNodeRoutes(to: "phone")
        #expect(onA.drain() == [])
        let viaA = try cluster.provider(via: 0)
        for id in ["p1", "p2", "p3"] { _ = try viaA.push(.device("phone"), id: id) }
        #expect(onA.drain(acknowledge: false) == [.push("p1"), .push("p2"), .push("p3")])
        // On g2: p1..p3 come back, one over the capacity of 2 (MISSED 1); "live" is new.
        let onB = try cluster.connectDevice("phone", to: 1)
        #expect(try cluster.provider(via: 1).push(.device("phone"), id: "live") == PushAck(written: 1, queued: 0))
        let frames = onB.drain(quietMs: 1_500)
        #expect(Set(frames) == [.missed(1), .push("p2"), .push("p3"), .push("live")], "\(cluster.diagnostics())")
        withKnownIssue("the put-back pushes arrive through JetStream after a push written at once", isIntermittent: true) {
            #expect(frames == [.missed(1), .push("p2"), .push("p3"), .push("live")])
        }
    }
}
