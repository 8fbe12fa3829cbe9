import Foundation
import Testing
import PushClient
import PushTestSupport
import PushWire

/// A device moving while pushes for it flow through other nodes: what PUSH_ACK counted for
/// it reaches it on the connection it ends up with, without a reconnect to fetch it.
@Suite("A three-node gateway cluster: pushes racing a device's moves", .ownThread, .serialized, .enabled(if: NATSServer.testsEnabled))
struct ClusterProcessRaceTests {
    @Test("[4.13-7] pushes via two nodes while the device connects to the third: every counted push arrives there")
    func pushesRacingAConnect() throws {
        let cluster = try startCluster(devices: [ClusterDevice("phone")], gatewayArguments: ["--queue-capacity", "1000"])
        let loads = try (0..<2).map { PushLoad(provider: try cluster.provider(via: $0), target: "phone", prefix: "via-g\($0 + 1)") }
        loads.forEach { $0.start() }
        // Pushes queued before the device connects, and more racing its connect.
        for load in loads { #expect(load.waitForReplies(10), "pushes are answered before the device connects") }
        let phone = try cluster.connectDevice("phone", to: 2)
        for load in loads { #expect(load.waitForReplies(10), "pushes are answered after the device connects") }
        let outcomes = loads.flatMap { $0.stop() }
        let frames = phone.drain(quietMs: 3_000)
        let received = frames.compactMap { if case .push(let id) = $0 { id } else { nil } }
        let counted = PushLoad.counted(outcomes)
        #expect(outcomes.count > 20)
        #expect(counted.isSubset(of: Set(received)),
                "\(counted.subtracting(received).count) of \(counted.count) counted pushes never arrived, e.g. \(counted.subtracting(received).sorted().prefix(5)): \(cluster.diagnostics())")
        #expect(received.count == Set(received).count, "\(received.count - Set(received).count) arrived twice")
        #expect(!frames.contains { if case .missed = $0 { true } else { false } }, "nothing dropped: \(frames.filter { if case .push = $0 { false } else { true } })")
    }

    @Test("[5.5-3] [4.14-7] a device hopping g1, g2, g3 under pushes: each hop REPLACED, every counted push arrives on some connection")
    func hoppingDevice() throws {
        let cluster = try startCluster(devices: [ClusterDevice("phone")], gatewayArguments: ["--queue-capacity", "1000"])
        var connections = [try cluster.connectDevice("phone", to: 0)]
        try cluster.waitUntilEveryNodeRoutes(to: "phone")
        let load = PushLoad(provider: try cluster.provider(via: 1), target: "phone")
        load.start()
        var received: [String] = []
        for next in [1, 2] {
            #expect(load.waitForReplies(10), "pushes are answered before the hop to g\(next + 1)")
            // The old connection is read only after the new one exists, and not acknowledged:
            // what it was written goes back to the queue ([4.14-7]) and on to the new node.
            let connection = try cluster.connectDevice("phone", to: next)
            let frames = connections.last?.drain(quietMs: 1_000, acknowledge: false) ?? []
            #expect(frames.last == .goaway(.replaced), "hop to g\(next + 1): \(frames.suffix(3))")
            received += frames.compactMap { if case .push(let id) = $0 { id } else { nil } }
            connections.append(connection)
        }
        #expect(load.waitForReplies(10), "pushes are answered after the last hop")
        let outcomes = load.stop()
        received += (connections.last?.drain(quietMs: 3_000) ?? []).compactMap { if case .push(let id) = $0 { id } else { nil } }
        let counted = PushLoad.counted(outcomes)
        #expect(counted.isSubset(of: Set(received)),
                "\(counted.subtracting(received).count) of \(counted.count) counted pushes never arrived, e.g. \(counted.subtracting(received).sorted().prefix(5)): \(cluster.diagnostics())")
        #expect(cluster.metric(0, "securepush_gateway_cluster_replaced_elsewhere_total") == 1)
        #expect(cluster.metric(1, "securepush_gateway_cluster_replaced_elsewhere_total") == 1)
    }
}
