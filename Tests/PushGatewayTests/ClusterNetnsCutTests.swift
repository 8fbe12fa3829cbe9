import Foundation
import Testing
import PushClient
import PushClock
import PushEventLoop
import PushTestSupport
import PushWire

/// Issue 28, item 1: one node cut off from NATS, in its own network namespace, for longer
/// than every timeout of the cluster (node 3 s, forward 2 s, JetStream request 5 s, the
/// node's own NATS pings 3 s), then healed. In the suite of the other namespace test, as
/// namespaces and the bridge are named after the process and must not be made twice at once.
extension ClusterNetnsTests {
    static let cutSeconds: Int64 = 15
    /// After the heal, every acknowledged push is shown within this long.
    static let healBoundSeconds = 10.0

    @Test("a node cut off from NATS for 15 s says not ready within 5 s, serves its devices meanwhile, and after the heal every acknowledged push is shown exactly once without a reconnect")
    func nodeCutOffFromNATS() throws {
        let hosts = try NetworkNamespaces(count: 3)
        defer { hosts.remove() }
        let devices = [ClusterDevice("cut-a"), ClusterDevice("cut-b"), ClusterDevice("other")]
        let setup = try NetnsCluster(hosts: hosts, devices: devices)
        defer { setup.stop() }
        try setup.waitUntilFormed()
        let cutNode = 2
        // Two devices on the node that is cut off, one on another; each given its node only.
        let fleet = try DeviceFleet(store: setup.storeEndpoint, gateways: setup.gatewayAddresses, devices: devices,
                                    homes: [cutNode, cutNode, 1], onlyHome: true, registration: { try setup.deployment.enrolledRegistration($0) })
        try fleet.loginAll()
        #expect(fleet.run(until: { fleet.connectedDevices == devices.count }), "every device reached its gateway")
        for device in devices { try setup.waitUntilRoutes(to: device.id, via: 0) }

        // Through node 1, which stays linked, and node 3, which is cut off.
        let traffic = DeviceTraffic(fleet: fleet, providerKey: setup.deployment.deployment.providerKey,
                                    devices: devices.map(\.id), via: [0, cutNode])
        traffic.start(everyMs: 50)
        #expect(fleet.run(until: { traffic.sent >= 20 }))

        try hosts.cut(cutNode, from: hosts.secondHostAddress)
        let cutAt = Clocks.monotonicMilliseconds()
        let noticed = fleet.run(until: throttled { !setup.isReady(cutNode) }, timeoutSeconds: 10)
        let noticedMs = Clocks.monotonicMilliseconds() - cutAt
        print("g3 said not ready \(noticedMs) ms into the cut")
        #expect(noticed && noticedMs < 5_000, "g3 noticed the cut within 5 s: \(noticedMs) ms")
        fleet.run(until: { Clocks.monotonicMilliseconds() - cutAt >= Self.cutSeconds * 1000 }, timeoutSeconds: Double(Self.cutSeconds) + 5)
        // Its own devices were served all along: pushes through it were written to them.
        let servedDuringCut = traffic.acknowledged.values.filter { (sent: DeviceTraffic.Acknowledged) -> Bool in
            sent.via == cutNode && sent.device != "other" && sent.ack.written == 1 && sent.atMs > cutAt + 5_000
        }
        #expect(!servedDuringCut.isEmpty, "pushes through g3 reached its devices during the cut")
        #expect(!setup.isReady(cutNode), "g3 still not ready at the end of the cut")

        try hosts.heal(cutNode, from: hosts.secondHostAddress)
        let healedAt = Clocks.monotonicMilliseconds()
        let ready = fleet.run(until: throttled { setup.isReady(cutNode) }, timeoutSeconds: 15)
        print("g3 ready again \(Clocks.monotonicMilliseconds() - healedAt) ms after the heal")
        #expect(ready, "g3 reconnected: \(setup.diagnostics())")
        // What g3 could not reach it did not count: pushes through it for the device on g2
        // went neither to it nor to a queue while the cut lasted, and were answered BUSY
        // for the provider to retry ([4.13-13]).
        #expect(traffic.busy.contains { $0.hasSuffix("-for-other-via-g\(cutNode + 1)") },
                "pushes through g3 for the device on g2 answered BUSY during the cut")
        let countedThroughCutNode = traffic.acknowledged.filter { (_, sent: DeviceTraffic.Acknowledged) -> Bool in
            sent.via == cutNode && sent.device == "other" && sent.atMs > cutAt && sent.atMs < healedAt
        }
        #expect(countedThroughCutNode.isEmpty, "counted while g3 could reach neither g2 nor JetStream: \(countedThroughCutNode.keys.prefix(3))")
        let afterHeal = traffic.sent
        #expect(fleet.run(until: { traffic.sent >= afterHeal + 10 }))
        traffic.stop()
        #expect(fleet.run(until: { traffic.finished == traffic.sent }, timeoutSeconds: 20), "\(traffic.finished) of \(traffic.sent) sends finished")

        let allShown = fleet.run(until: { traffic.everyAcknowledgedShown },
                                 timeoutSeconds: max(1, Self.healBoundSeconds - Double(Clocks.monotonicMilliseconds() - healedAt) / 1000))
        print("every acknowledged push shown \(Clocks.monotonicMilliseconds() - healedAt) ms after the heal "
              + "(\(traffic.acknowledged.count) of \(traffic.sent) acknowledged)")
        #expect(allShown, "stuck: \(traffic.unshown().mapValues { Array($0.prefix(5)) })\n\(setup.diagnostics())")
        #expect(traffic.shownTwice().isEmpty, "\(traffic.shownTwice().prefix(5))")
        #expect(traffic.overcounted.isEmpty, "\(traffic.overcounted.prefix(5))")
        #expect(traffic.failures.isEmpty, "\(traffic.failures.prefix(5))")
        let cutDevicesAcknowledged = traffic.acknowledged.values.filter { (sent: DeviceTraffic.Acknowledged) -> Bool in
            sent.device != "other" && sent.via == 0 && sent.atMs > cutAt + 5_000
        }
        #expect(!cutDevicesAcknowledged.isEmpty, "pushes through g1 for g3's devices were acknowledged (queued) during the cut")
        for device in devices {
            #expect(fleet.connects(of: device.id) == 1, "\(device.id) never reconnected")
        }
    }
}

extension NetnsCluster {
    /// Waits until node `index` routes a push to `device` as connected (connected-only
    /// probes, which a `DeviceClient` ignores: their ids are no payload ids).
    func waitUntilRoutes(to device: String, via index: Int, timeoutSeconds: Double = 10) throws {
        let provider = try self.provider(via: index)
        var serial = 0
        let routed = waitUntil(timeoutSeconds: timeoutSeconds, pollMilliseconds: 50) {
            serial += 1
            return (try? provider.push(.device(device), id: "\(probePrefix)\(serial)", ttl: 0))?.written == 1
        }
        guard routed else { throw ServiceError.failed("g\(index + 1) never routed to \(device):\n\(diagnostics())") }
    }
}
