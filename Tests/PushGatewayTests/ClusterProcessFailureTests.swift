import Foundation
import Testing
import PushClient
import PushEventLoop
import PushTestSupport
import PushWire

/// The cluster under failure (issue 15, item 8): a gateway SIGKILLed while pushes flow,
/// and the nats-server restarted while pushes flow.
@Suite("A three-node gateway cluster under failure", .ownThread, .serialized, .enabled(if: NATSServer.testsEnabled))
struct ClusterProcessFailureTests {
    @Test("SIGKILL of one node under load: its devices reconnect elsewhere and every stored payload is shown exactly once")
    func killOneNode() throws {
        let users = (0..<4).map { "user\($0)" }
        // Device j of each user starts on node j; each takes every node's address, its own first.
        let devices = users.flatMap { user in (0..<3).map { ClusterDevice("\(user)-d\($0)", user: user) } }
        let cluster = try startCluster(users: users, devices: devices)
        let fleet = try DeviceFleet(cluster, devices: devices)
        try fleet.loginAll()
        #expect(fleet.run(until: { fleet.connectedDevices == devices.count }), "every device reached its gateway")
        for device in devices { try cluster.waitUntilEveryNodeRoutes(to: device.id) }
        let victim = 2
        let victimDevices = devices.filter { $0.id.hasSuffix("-d\(victim)") }.map(\.id)

        // Providers on the nodes that live: a PUSH lost with its gateway would leave its
        // payload to the next SYNC, and devices on live nodes have no reason to SYNC.
        let providers = (0..<2).map { index in
            ProviderClient(loop: fleet.loop, store: fleet.storeEndpoint, gateway: fleet.gatewayEndpoint(first: index),
                           providerKey: cluster.deployment.deployment.providerKey)
        }
        defer { providers.forEach { $0.stop() } }
        let total = 90
        var sent = 0
        var stored: [String: [String]] = [:]  // user -> payload texts stored
        var failures: [String] = []
        var finished = 0
        let sender = fleet.loop.schedule(after: .milliseconds(20), repeating: true) {
            guard sent < total else { return }
            let user = users[sent % users.count]
            let text = "payload-\(sent)-for-\(user)"
            sent += 1
            if sent == total / 3 { cluster.kill(victim) }
            providers[sent % 2].send(ProviderClient.SecureMessage(recipient: user, payload: Array(text.utf8), target: .user(user))) { result in
                finished += 1
                switch result {
                case .success: stored[user, default: []].append(text)
                case .failure(let error): failures.append("\(text): \(error)")
                }
            }
        }
        #expect(fleet.run(until: { finished == total }, timeoutSeconds: 30), "\(finished) of \(total) sends finished")
        sender.cancel()
        #expect(failures.isEmpty, "sends via live nodes all succeed: \(failures.prefix(5))")

        let complete = fleet.run(until: {
            devices.allSatisfy { Set(fleet.texts(of: $0.id)) == Set(stored[$0.user] ?? []) }
        }, timeoutSeconds: 20)
        for device in devices {
            let texts = fleet.texts(of: device.id)
            let expected = Set(stored[device.user] ?? [])
            #expect(Set(texts) == expected, "\(device.id): \(expected.subtracting(texts).sorted().prefix(5)) missing")
            #expect(texts.count == Set(texts).count, "\(device.id) showed a payload twice")
        }
        if !complete { Issue.record("not every payload was shown:\n\(cluster.diagnostics())") }
        try cluster.waitUntilFormed(nodes: 2, timeoutSeconds: 10)
        for id in victimDevices {
            #expect(fleet.gatewayAddress(of: id) != fleet.gatewayAddresses[victim], "\(id) moved to a live node")
            #expect(fleet.connects(of: id) >= 2, "\(id) reconnected")
        }
        #expect(fleet.stoppedDevices.isEmpty, "no device stopped: \(fleet.stoppedDevices)")
    }

    @Test("a node SIGKILLed leaves the cluster within the node timeout, and started again under its name it rejoins")
    func killedNodeRejoins() throws {
        let cluster = try startCluster(devices: [ClusterDevice("phone")])
        let phone = try cluster.connectDevice("phone", to: 2)
        try cluster.waitUntilEveryNodeRoutes(to: "phone")
        #expect(phone.drain() == [])
        cluster.kill(2)
        try cluster.waitUntilFormed(nodes: 2, timeoutSeconds: 10)
        // The dead node's devices count as offline now: their pushes wait in JetStream.
        #expect(try cluster.provider(via: 0).push(.device("phone"), id: "while-away") == PushAck(written: 0, queued: 1))
        try cluster.restart(2)
        try cluster.waitUntilFormed(nodes: 3)
        let again = try cluster.connectDevice("phone", to: 2)
        #expect(again.drain(quietMs: 1_500) == [.push("while-away")], "\(cluster.diagnostics())")
        try cluster.waitUntilRoutes(to: "phone", via: 0)
        #expect(try cluster.provider(via: 0).push(.device("phone"), id: "after") == PushAck(written: 1, queued: 0))
        #expect(again.drain() == [.push("after")])
    }

    @Test("nats-server restarted under load: the gateways recover without a restart, queued pushes survive in JetStream")
    func restartNATS() throws {
        let devices = (0..<3).map { ClusterDevice("d\($0)") } + [ClusterDevice("sleeper")]
        let cluster = try startCluster(devices: devices)
        let clients = try (0..<3).map { try cluster.connectDevice("d\($0)", to: $0) }
        for index in 0..<3 { try cluster.waitUntilEveryNodeRoutes(to: "d\(index)") }
        try cluster.connectDevice("sleeper", to: 0).shutdownWrite()
        #expect(waitUntil { cluster.metric(0, "securepush_gateway_devices_online") == 1 })
        let viaB = try cluster.provider(via: 1)
        #expect(try viaB.push(.device("sleeper"), id: "kept-1") == PushAck(written: 0, queued: 1))
        #expect(try viaB.push(.device("sleeper"), id: "kept-2") == PushAck(written: 0, queued: 1))

        // Load: g1 pushes to d1 (on g2) without pause while the server goes away and comes back.
        let load = PushLoad(provider: try cluster.provider(via: 0), target: "d1")
        load.start()
        #expect(load.waitForReplies(10), "pushes are answered before the server stops")
        cluster.nats.stop()
        #expect(waitUntil(timeoutSeconds: 20) { (0..<3).allSatisfy { cluster.metric($0, "securepush_gateway_cluster_nats_connected") == 0 } },
                "every node saw the server go: \(cluster.diagnostics())")
        try cluster.nats.restart()
        let recovered = waitUntil(timeoutSeconds: 20) {
            (0..<3).allSatisfy { cluster.metric($0, "securepush_gateway_cluster_nats_connected") == 1 && cluster.isReady($0) }
        }
        #expect(recovered, "every node reconnected to NATS: \(cluster.diagnostics())")
        try cluster.waitUntilFormed(nodes: 3)
        #expect(load.waitForReplies(10), "pushes are answered after the restart")
        let outcomes = load.stop()
        #expect(outcomes.count > 10, "pushes flowed during the restart")
        #expect(cluster.liveIndices.count == 3 && (0..<3).allSatisfy { (try? cluster.node($0).child.hasExited) == false })

        // Every push that PUSH_ACK counted reached d1, once or more (a forward delivered
        // while its reply was lost is queued too: at least once, the device dedups by ID).
        let received = clients[1].drain(quietMs: 2_000).compactMap { if case .push(let id) = $0 { id } else { nil } }
        let counted = outcomes.filter { $0.ack.map { $0.written + $0.queued } == 1 }.map(\.id)
        #expect(Set(counted).isSubset(of: Set(received)), "lost: \(Set(counted).subtracting(received).sorted().prefix(5))")
        #expect(Set(received).isSubset(of: Set(outcomes.map(\.id))))
        let overcounted = outcomes.filter { ($0.ack?.written ?? 0) + ($0.ack?.queued ?? 0) > 1 }.count
        #expect(overcounted == 0, "one device, at most one count")

        for index in 0..<3 { try cluster.waitUntilEveryNodeRoutes(to: "d\(index)") }
        for via in 0..<3 {
            let provider = try cluster.provider(via: via)
            for target in 0..<3 where target != via {
                let id = "after-g\(via + 1)-d\(target)"
                #expect(try provider.push(.device("d\(target)"), id: id) == PushAck(written: 1, queued: 0))
                #expect(try clients[target].nextFrame() == .push(id))
            }
        }
        let sleeper = try cluster.connectDevice("sleeper", to: 2)
        #expect(sleeper.drain(quietMs: 1_500) == [.push("kept-1"), .push("kept-2")], "queued before the restart: \(cluster.diagnostics())")
    }
}
