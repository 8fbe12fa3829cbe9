import Foundation
import Testing
import PushClient
import PushTestSupport
import PushWire

/// What a node holds for a device when the device leaves it, by a node shutting down or by
/// connecting elsewhere: the unacknowledged pushes go back to its queue in JetStream
/// ([4.14-7]) and come to the node it connects to next.
@Suite("A three-node gateway cluster: pushes handed over between nodes", .ownThread, .serialized, .enabled(if: NATSServer.testsEnabled))
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

    /// [4.14-8] as on one node: MISSED, then the pushes put back, then the rest. The
    /// pushes put back on the old node reach the new one through JetStream after HELLO_OK;
    /// a push that arrives meanwhile waits behind them (counted as queued, like a push
    /// behind the delivery window).
    @Test("[4.14-8] [4.13-9] after a move, MISSED and the pushes put back come before a push that arrived after HELLO_OK")
    func orderAfterMove() throws {
        let cluster = try startCluster(devices: [ClusterDevice("phone")], gatewayArguments: ["--queue-capacity", "2"])
        let onA = try cluster.connectDevice("phone", to: 0)
        try cluster.waitUntilEveryNodeRoutes(to: "phone")
        #expect(onA.drain() == [])
        let viaA = try cluster.provider(via: 0)
        for id in ["p1", "p2", "p3"] { _ = try viaA.push(.device("phone"), id: id) }
        #expect(onA.drain(acknowledge: false) == [.push("p1"), .push("p2"), .push("p3")])
        // On g2: p1..p3 come back, one over the capacity of 2, so p1 is dropped. If "live"
        // comes while they are still on their way (the usual case), it waits behind them
        // and the full queue drops the oldest again: MISSED 2, then p3 and live. If they
        // were written before it came (a slow machine), MISSED 1, p2, p3, live. Either way
        // MISSED comes first, the put-back pushes follow in the order written, and live last.
        let viaB = try cluster.provider(via: 1)
        let onB = try cluster.connectDevice("phone", to: 1)
        let ack = try viaB.push(.device("phone"), id: "live")
        #expect(ack.written + ack.queued == 1)
        let frames = onB.drain(quietMs: 1_500)
        let putBack: [DeviceFrame] = [.push("p1"), .push("p2"), .push("p3")]
        let expected = (1...2).map { missed in [.missed(UInt32(missed))] + putBack.suffix(3 - missed) + [.push("live")] }
        #expect(expected.contains(frames), "\(frames) \(cluster.diagnostics())")
    }
}
