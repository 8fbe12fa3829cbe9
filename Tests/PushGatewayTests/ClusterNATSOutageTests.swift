import Foundation
import Testing
import PushClient
import PushClock
import PushEventLoop
import PushTestSupport
import PushWire

/// Issue 28, item 1: no acknowledged push stays stuck while its device is connected. The
/// nats-server is SIGKILLed and restarted under load, several times; devices stay
/// connected to their nodes throughout, so nothing but the cluster can bring them a push
/// (no reconnect, hence no SYNC).
@Suite("A gateway cluster through NATS outages, devices connected", .ownThread, .serialized, .enabled(if: NATSServer.testsEnabled))
struct ClusterNATSOutageTests {
    /// After the last restart, every acknowledged push is shown within this long.
    static let recoveryBoundSeconds = 10.0
    static let outageMs: Int64 = 3_000

    @Test("nats-server SIGKILLed and restarted 3 times under load: every acknowledged push shown exactly once, no device reconnects, no node taken for dead")
    func natsKilledAndRestarted() throws {
        let devices = (0..<4).map { ClusterDevice("d\($0)") }
        let cluster = try startCluster(devices: devices)
        // Device k on node k mod 3, and given only that node: it never moves.
        let fleet = try DeviceFleet(store: ServerLink.Endpoint(host: "127.0.0.1", port: cluster.store.port),
                                    gateways: try (0..<3).map { HostPort(host: "127.0.0.1", port: try cluster.node($0).port) },
                                    devices: devices, onlyHome: true, registration: cluster.registration)
        try fleet.loginAll()
        #expect(fleet.run(until: { fleet.connectedDevices == devices.count }), "every device reached its gateway")
        for device in devices { try cluster.waitUntilEveryNodeRoutes(to: device.id) }

        let traffic = DeviceTraffic(fleet: fleet, providerKey: cluster.deployment.deployment.providerKey,
                                    devices: devices.map(\.id), via: [0, 1, 2])
        traffic.start(everyMs: 40)
        let everyNodeReady = throttled { (0..<3).allSatisfy { cluster.isReady($0) } }
        var lastRestartMs: Int64 = 0
        for round in 1...3 {
            let before = traffic.sent
            #expect(fleet.run(until: { traffic.sent >= before + 25 }), "round \(round): sends flow")
            cluster.nats.kill()
            let killedAt = Clocks.monotonicMilliseconds()
            // The operator's gap: 3 s with no server (the node timeout), sends going on.
            fleet.run(until: { Clocks.monotonicMilliseconds() - killedAt >= Self.outageMs }, timeoutSeconds: 10)
            try cluster.nats.restart()
            lastRestartMs = Clocks.monotonicMilliseconds()
            let ready = fleet.run(until: everyNodeReady, timeoutSeconds: 20)
            print("round \(round): every node ready \(Clocks.monotonicMilliseconds() - lastRestartMs) ms after nats-server restarted")
            #expect(ready, "round \(round): every node ready again: \(cluster.diagnostics())")
        }
        // Sends right after the server is back: those the operator found queued for connected devices.
        let afterLast = traffic.sent
        #expect(fleet.run(until: { traffic.sent >= afterLast + 25 }))
        traffic.stop()
        #expect(fleet.run(until: { traffic.finished == traffic.sent }, timeoutSeconds: 20), "\(traffic.finished) of \(traffic.sent) sends finished")

        let sinceRestart = Double(Clocks.monotonicMilliseconds() - lastRestartMs) / 1000
        let allShown = fleet.run(until: { traffic.everyAcknowledgedShown }, timeoutSeconds: max(1, Self.recoveryBoundSeconds - sinceRestart))
        print("every acknowledged push shown \(Clocks.monotonicMilliseconds() - lastRestartMs) ms after the last restart "
              + "(\(traffic.acknowledged.count) of \(traffic.sent) acknowledged)")
        #expect(allShown, "stuck: \(traffic.unshown().mapValues { Array($0.prefix(5)) })\n\(cluster.diagnostics())")
        #expect(traffic.shownTwice().isEmpty, "\(traffic.shownTwice().prefix(5))")
        #expect(traffic.overcounted.isEmpty, "\(traffic.overcounted.prefix(5))")
        #expect(traffic.failures.isEmpty, "\(traffic.failures.prefix(5))")
        #expect(traffic.acknowledged.count > traffic.sent / 2, "most sends were acknowledged")
        for device in devices {
            #expect(fleet.connects(of: device.id) == 1, "\(device.id) never reconnected")
        }
        for index in 0..<3 {
            let log = (try? cluster.node(index).standardErrorText()) ?? ""
            #expect(!log.contains("a cluster node went silent"), "\(cluster.names[index]) took a live node for dead")
        }
    }

    @Test("a node paused past the node timeout: a push queued meanwhile for its connected device reaches it once the node is heard again, without a reconnect")
    func pausedNodeGetsItsQueue() throws {
        let cluster = try startCluster(devices: [ClusterDevice("phone")])
        let phone = try cluster.connectDevice("phone", to: 1)
        try cluster.waitUntilEveryNodeRoutes(to: "phone")
        let paused = try cluster.node(1).child
        paused.signal(SIGSTOP)
        defer { paused.signal(SIGCONT) }
        #expect(waitUntil(timeoutSeconds: 10) { cluster.metric(0, "securepush_gateway_cluster_nodes") == 2 }, "g1 took g2 for dead")
        // g1 counts phone offline now: the push waits in JetStream, and g2 cannot be told.
        #expect(try cluster.provider(via: 0).push(.device("phone"), id: "while-paused") == PushAck(written: 0, queued: 1))
        paused.signal(SIGCONT)
        let resumedAt = Clocks.monotonicMilliseconds()
        #expect(try phone.nextFrame(timeoutMs: 10_000) == .push("while-paused"), "\(cluster.diagnostics())")
        print("the push queued while g2 was paused reached its device \(Clocks.monotonicMilliseconds() - resumedAt) ms after g2 resumed")
        try cluster.waitUntilRoutes(to: "phone", via: 0)
        #expect(try cluster.provider(via: 0).push(.device("phone"), id: "after") == PushAck(written: 1, queued: 0))
        #expect(phone.drain() == [.push("after")])
    }
}
