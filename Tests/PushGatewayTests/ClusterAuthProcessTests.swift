import Testing
import PushClient
import PushClock
import PushEventLoop
import PushNATS
import PushSecurity
import PushTestSupport
import PushWire
@testable import PushGateway

/// Issue 28, item 2: a NATS client without the deployment's keys can neither inject a push
/// nor rewrite a device's queue. Real nodes, a real nats-server, and a plain NATS client of
/// the test's own publishing what an attacker with NATS access could.
@Suite("A gateway cluster refuses what a plain NATS client forges", .ownThread, .serialized, .enabled(if: NATSServer.testsEnabled))
struct ClusterAuthProcessTests {
    static let rejected = "securepush_gateway_cluster_messages_rejected_total"

    /// Node `index`'s refusals by their `reason` label, those counted at least once.
    static func refusals(_ cluster: GatewayClusterHarness, _ index: Int) -> [String: Double] {
        (cluster.metric(index, rejected, by: "reason") ?? [:]).filter { $0.value > 0 }
    }

    @Test("a forged forward, one sealed under another key, a replayed genuine one, forged presence and presence sealed in another node's name are dropped and counted by reason; genuine pushes still arrive")
    func forgedForward() throws {
        let cluster = try startCluster(nodes: 2, devices: [ClusterDevice("phone")])
        let phone = try cluster.connectDevice("phone", to: 0)
        try cluster.waitUntilEveryNodeRoutes(to: "phone")
        #expect(phone.drain() == [])
        let intruder = try PlainNATSClient(url: cluster.nats.url)
        let subject = "securepush.node.g1.push"
        var captured: [UInt8]?
        try intruder.subscribe(subject) { captured = $0 }

        #expect(try cluster.provider(via: 1).push(.device("phone"), id: "genuine") == PushAck(written: 1, queued: 0), "\(cluster.diagnostics())")
        #expect(try phone.nextFrame() == .push("genuine"))
        #expect(intruder.loop.run(until: { captured != nil }, timeoutSeconds: 5), "the genuine forward was seen on NATS")

        let forged = ForwardBatch(id: 1, pushes: [ForwardedPush(push: Self.push("forged"), deviceIDs: ["phone"])]).encoded()
        let otherDeployment = ClusterSeal(serverKey: try SecretKey.generate())
        try intruder.publish(subject, forged)
        try intruder.publish(subject, otherDeployment.seal(forged, subject: subject, sender: "g2", sentAtMs: Clocks.wallMilliseconds(), nonce: 1))
        if let captured { try intruder.publish(subject, captured) }
        // Forged presence: "phone left g1", which would make g2 queue its pushes instead of forwarding them.
        let left = PresenceChange(deviceID: "phone", online: false, stamp: .max, user: "alice", tags: [])
        try intruder.publish("securepush.presence", PresenceBatch(node: "g1", boot: 1, changes: [left]).encoded())
        // Every reason is exposed from the start, each counted under its own label.
        #expect(Set((cluster.metric(0, Self.rejected, by: "reason") ?? [:]).keys)
                == ["unsealed", "truncated", "bad_tag", "sender", "clock", "replayed"])
        #expect(waitUntil { Self.refusals(cluster, 0) == ["unsealed": 2, "bad_tag": 1, "replayed": 1]
                    && Self.refusals(cluster, 1) == ["unsealed": 1] },
                "\(Self.refusals(cluster, 0)) \(Self.refusals(cluster, 1))")
        #expect(phone.drain() == [], "nothing forged or replayed was delivered")

        // With the deployment's key: one sealed a minute ago is refused, a fresh one is delivered.
        let deploymentSeal = ClusterSeal(serverKey: try Deployment.readKey(cluster.directory + "/" + Deployment.serverKeyFile))
        let keyed = ForwardBatch(id: 2, pushes: [ForwardedPush(push: Self.push("keyed"), deviceIDs: ["phone"])]).encoded()
        let nowMs = Clocks.wallMilliseconds()
        try intruder.publish(subject, deploymentSeal.seal(keyed, subject: subject, sender: "g2", sentAtMs: nowMs - 60_000, nonce: 1))
        // A seal's version byte on fewer bytes than a seal takes.
        try intruder.publish(subject, [ClusterSeal.version, 2, 0x67, 0x32])
        #expect(waitUntil { Self.refusals(cluster, 0) == ["unsealed": 2, "bad_tag": 1, "replayed": 1, "clock": 1, "truncated": 1] },
                "\(Self.refusals(cluster, 0))")
        #expect(phone.drain() == [], "a stale message is not delivered")
        try intruder.publish(subject, deploymentSeal.seal(keyed, subject: subject, sender: "g2", sentAtMs: nowMs, nonce: 2))
        #expect(try phone.nextFrame() == .push("keyed"), "what the key seals is taken: the refusals above are the seal's")

        // With the key, in another node's name: presence sealed by "g2" that speaks for "g1"
        // ("phone left g1") is refused by both nodes, whichever holds the key.
        let impostor = PresenceBatch(node: "g1", boot: 1, changes: [left]).encoded()
        try intruder.publish("securepush.presence",
                             deploymentSeal.seal(impostor, subject: "securepush.presence", sender: "g2", sentAtMs: Clocks.wallMilliseconds(), nonce: 3))
        #expect(waitUntil { Self.refusals(cluster, 0)["sender"] == 1 && Self.refusals(cluster, 1) == ["unsealed": 1, "sender": 1] },
                "\(Self.refusals(cluster, 0)) \(Self.refusals(cluster, 1))")

        #expect(try cluster.provider(via: 1).push(.device("phone"), id: "after") == PushAck(written: 1, queued: 0),
                "g2 still routes to g1")
        #expect(try phone.nextFrame() == .push("after"))
        #expect(Self.refusals(cluster, 1) == ["unsealed": 1, "sender": 1], "genuine traffic is never refused")
        #expect(Self.refusals(cluster, 0) == ["unsealed": 2, "bad_tag": 1, "replayed": 1, "clock": 1, "truncated": 1, "sender": 1])
    }

    @Test("a queue record written by a plain client (or by the build before authentication) is not delivered, is counted, and is replaced by the next genuine write")
    func forgedQueueRecord() throws {
        let cluster = try startCluster(nodes: 2, devices: [ClusterDevice("tablet")])
        let intruder = try PlainNATSClient(url: cluster.nats.url)
        let subject = "securepush.queue.tablet"
        let record = QueueRecord(user: "alice", entries: [QueueRecord.Entry(push: Self.push("forged-queued"), returned: false, rank: 0)])
        try intruder.publishToStream(subject, record.encoded())

        #expect(try cluster.provider(via: 0).push(.device("tablet"), id: "genuine-queued") == PushAck(written: 0, queued: 1),
                "\(cluster.diagnostics())")
        #expect(Self.refusals(cluster, 0) == ["unsealed": 1], "a record written without the seal")
        #expect(waitUntil { ((try? cluster.node(0).standardErrorText()) ?? "").contains("refused a device's queue record in JetStream") },
                "the refusal is logged \(cluster.diagnostics())")
        let tablet = try cluster.connectDevice("tablet", to: 1)
        #expect(try tablet.nextFrame() == .push("genuine-queued"))
        #expect(tablet.drain() == [], "the forged entry was never delivered")
        #expect(cluster.metric(1, Self.rejected, by: "reason") != nil && Self.refusals(cluster, 1) == [:],
                "the genuine write had replaced it \(cluster.diagnostics())")
    }

    @Test("with gateway.max_push_ttl_s, a stream an earlier build made is given that max_age, and a queue record not written for that long leaves it")
    func recordsExpire() throws {
        let cluster = try startCluster(nodes: 1, devices: [ClusterDevice("watch")], gatewayArguments: ["--max-push-ttl-s", "2"])
        let reader = try PlainNATSClient(url: cluster.nats.url)
        #expect(try reader.streamInfo().contains("\"max_age\":2000000000,"))
        // As the build before the bound made it: records kept for ever.
        try reader.ensureStream(StreamConfig(name: "SECUREPUSH_QUEUES", subjects: ["securepush.queue.>"], maxMessagesPerSubject: 1, maxAge: .zero))
        #expect(try reader.streamInfo().contains("\"max_age\":0,"))
        cluster.kill(0)
        try cluster.restart(0)
        try cluster.waitUntilFormed()
        #expect(try reader.streamInfo().contains("\"max_age\":2000000000,"), "updated at start")

        #expect(try cluster.provider(via: 0).push(.device("watch"), id: "short", ttl: 3_600) == PushAck(written: 0, queued: 1),
                "\(cluster.diagnostics())")
        #expect(try reader.lastStored("securepush.queue.watch") != nil)
        #expect(waitUntil(timeoutSeconds: 15, pollMilliseconds: 250) { (try? reader.lastStored("securepush.queue.watch")) == .some(nil) },
                "the record outlived the bound")
    }

    static func push(_ id: String) -> ClusterPush {
        let frame = Push(target: nil, id: Array(id.utf8)).deviceFrame(correlation: 0)
        return ClusterPush(deviceFrame: frame, priority: Push.defaultPriority, collapseKey: nil, expiresAtWallMs: Clocks.wallMilliseconds() + 600_000)
    }
}

/// A NATS client with no key of the deployment: what anyone let into the NATS account has.
final class PlainNATSClient {
    let loop: EventLoop
    let connection: NATSConnection
    let jetStream: JetStream
    private var subscriptions: [NATSSubscription] = []

    init(url: String) throws {
        loop = try EventLoop()
        connection = try NATSConnection(loop: loop, servers: [url], name: "intruder")
        jetStream = JetStream(connection: connection)
        guard loop.run(until: { self.connection.isConnected }, timeoutSeconds: 10) else { throw ServiceError.failed("not connected to \(url)") }
    }

    deinit {
        connection.close()
        loop.shutdown()
    }

    func subscribe(_ subject: String, _ handler: @escaping ([UInt8]) -> Void) throws {
        subscriptions.append(try connection.subscribe(subject) { handler($0.data) })
        try flush()
    }

    func publish(_ subject: String, _ data: [UInt8]) throws {
        try connection.publish(subject, data)
        try flush()
    }

    func publishToStream(_ subject: String, _ data: [UInt8]) throws {
        _ = try complete { self.jetStream.publish(subject, data, completion: $0) }.get()
    }

    func ensureStream(_ config: StreamConfig) throws {
        try complete { self.jetStream.ensureStream(config, completion: $0) }.get()
    }

    func streamInfo() throws -> String {
        let reply = try complete { self.connection.request("$JS.API.STREAM.INFO.SECUREPUSH_QUEUES", [], timeout: .seconds(5), completion: $0) }.get()
        return String(decoding: reply.data, as: UTF8.self)
    }

    func lastStored(_ subject: String) throws -> StoredMessage? {
        try complete { self.jetStream.lastMessage(stream: "SECUREPUSH_QUEUES", subject: subject, completion: $0) }.get()
    }

    /// Returns once the server has processed what was sent before: a request nobody answers
    /// comes back only after the messages ahead of it.
    private func flush() throws {
        _ = try complete { self.connection.request("flush.nobody", [], timeout: .seconds(5), completion: $0) }
    }

    private func complete<T>(_ start: (@escaping (T) -> Void) -> Void) throws -> T {
        var outcome: T?
        start { outcome = $0 }
        guard loop.run(until: { outcome != nil }, timeoutSeconds: 10), let outcome else { throw ServiceError.failed("NATS did not answer") }
        return outcome
    }
}
