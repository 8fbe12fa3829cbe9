import Testing
import PushClient
import PushGateway
import PushTestSupport
import PushWire

/// `securepush gateway --loops N`: several loop threads in one process, each serving the
/// devices whose id hashes to it, behind one listening port. Every test checks that its
/// devices really are spread over more than one home loop.
@Suite("A gateway on several loop threads", .ownThread)
struct GatewayLoopsProcessTests {
    static let loops = 4

    /// Device ids with at least one on every loop.
    static func spreadIDs(_ prefix: String, count: Int) -> [String] {
        let ids = (0..<count).map { "\(prefix)-\($0)" }
        let homes = Set(ids.map { LoopPlacement.home(of: $0, count: loops) })
        precondition(homes.count == loops, "the ids reach every loop")
        return ids
    }

    @Test("a PUSH to a device reaches it whichever loop the provider and the device came in on")
    func deviceTargets() throws {
        let gateway = try GatewayProcess(arguments: ["--loops", "\(Self.loops)"])
        let ids = Self.spreadIDs("phone", count: 24)
        let devices = try ids.map { try gateway.device($0) }
        let providers = try (0..<3).map { _ in try gateway.provider() }
        for (index, id) in ids.enumerated() {
            let ack = try gateway.push(.device(id), id: "n-\(id)", via: providers[index % providers.count])
            #expect(ack == PushAck(written: 1, queued: 0), "\(id)")
        }
        for (index, device) in devices.enumerated() {
            #expect(try device.nextPushID() == "n-\(ids[index])")
        }
    }

    @Test("a PUSH to a user or a tag counts every loop's devices in one PUSH_ACK ([4.13-3])")
    func userAndTagTargets() throws {
        let gateway = try GatewayProcess(arguments: ["--loops", "\(Self.loops)"])
        let ids = Self.spreadIDs("bob-phone", count: 16)
        let devices = try ids.map { try gateway.device($0, user: "bob", tags: ["news"]) }
        let provider = try gateway.provider()
        #expect(try gateway.push(.user("bob"), id: "to-bob", via: provider) == PushAck(written: 16, queued: 0))
        for device in devices { #expect(try device.nextPushID() == "to-bob") }
        // Half of them leave: the tag's PUSH is written to the others and queued for them.
        for device in devices.prefix(8) { try device.shutdownWrite() }
        var ack = PushAck(written: 0, queued: 0)
        #expect(waitUntil {
            ack = (try? gateway.push(.tag("news"), id: "probe", via: provider, ttl: 0)) ?? ack
            return ack.written == 8
        }, "the gateway saw 8 devices leave: \(ack)")
        #expect(try gateway.push(.tag("news"), id: "to-news", via: provider) == PushAck(written: 8, queued: 8))
        for device in devices.suffix(8) {
            #expect(device.pushIDs(until: "to-news").last == "to-news")
        }
    }

    @Test("an offline device's queue waits on its home loop for its next connection")
    func queueFollowsHome() throws {
        let gateway = try GatewayProcess(arguments: ["--loops", "\(Self.loops)"])
        let provider = try gateway.provider()
        for id in Self.spreadIDs("tablet", count: 12) {
            try gateway.device(id).shutdownWrite()
            var ack = PushAck(written: 1, queued: 0)
            #expect(waitUntil {
                ack = (try? gateway.push(.device(id), id: "q-\(id)", via: provider)) ?? ack
                return ack.queued == 1
            }, "\(id) queued: \(ack)")
            // Reconnections land on any loop and move home: the queue is there.
            let seen = try gateway.device(id).pushIDs(until: "q-\(id)")
            #expect(seen.last == "q-\(id)", "\(id) got \(seen)")
        }
    }

    @Test("a second connection of a device replaces the first, whichever loops accepted them ([5.5-3])")
    func replaced() throws {
        let gateway = try GatewayProcess(arguments: ["--loops", "\(Self.loops)"])
        for id in Self.spreadIDs("watch", count: 8) {
            let first = try gateway.device(id)
            let second = try gateway.device(id)
            guard case .goaway(let goaway) = try first.nextPush().message else {
                Issue.record("\(id): no GOAWAY on the first connection")
                continue
            }
            #expect(goaway.status == .replaced)
            #expect(try gateway.push(.device(id), id: "after", via: try gateway.provider()) == PushAck(written: 1, queued: 0))
            #expect(try second.nextPushID() == "after")
        }
    }

    @Test("/metrics sums every loop's counters, and counts each PUSH once")
    func metricsSummed() throws {
        let gateway = try GatewayProcess(arguments: ["--loops", "\(Self.loops)", "--metrics", "127.0.0.1:0"])
        let ids = Self.spreadIDs("meter", count: 12)
        let devices = try ids.map { try gateway.device($0) }
        let provider = try gateway.provider()
        for id in ids { _ = try gateway.push(.device(id), id: "m", via: provider) }
        for device in devices { _ = try device.nextPushID() }
        var text = ""
        #expect(waitUntil {
            text = (try? gateway.scrapeMetrics()) ?? ""
            return text.contains("securepush_gateway_pushes_acknowledged_total 12")
        }, "\(text.split(separator: "\n").filter { $0.contains("pushes_") })")
        #expect(text.contains("securepush_gateway_pushes_written_total 12"))
        #expect(text.contains("securepush_gateway_pushes_accepted_total 12"))
    }

    @Test("--max-connections counts the whole process, not each loop: the next HELLO gets BUSY ([5.1-3])")
    func connectionCapIsProcessWide() throws {
        let gateway = try GatewayProcess(arguments: ["--loops", "\(Self.loops)", "--max-connections", "10"])
        let ids = Self.spreadIDs("cap", count: 12)
        let admitted = try ids.prefix(10).map { try gateway.device($0) }
        #expect(admitted.count == 10)
        let client = try gateway.reachable.connect()
        let reply = try client.hello(Hello(role: .device, credential: gateway.deployment.registration(ids[10], user: "alice", tags: [])))
        guard case .error(let error) = reply else {
            Issue.record("an eleventh device was admitted: \(reply)")
            return
        }
        #expect(error.status == .busy)
    }

    @Test("--loops out of range is refused at start")
    func refusedCounts() throws {
        let deployment = try TemporaryDeployment(commandLine: true)
        let tooMany = try SecurePushBinary.run(["gateway", "--data-dir", deployment.directory, "--loops", "1000"])
        #expect(tooMany.status != 0)
        #expect(tooMany.stderr.contains("--loops"))
    }
}

extension BlockingWireClient {
    /// The ids of the PUSHes that arrive, each acknowledged, up to `last` (or until none
    /// comes for 3 s).
    func pushIDs(until last: String) -> [String] {
        var seen: [String] = []
        while seen.last != last, seen.count < 1_000, let next = try? nextPushID() { seen.append(next) }
        return seen
    }
}
