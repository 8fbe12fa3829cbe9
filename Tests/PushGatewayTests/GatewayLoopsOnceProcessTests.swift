import Testing
import PushClient
import PushGateway
import PushTestSupport
import PushWire

extension BlockingWireClient {
    /// A provider's PUSH with `user` and `once` (revision 1.3); the PUSH_ACK.
    func push(_ target: PushTarget, id: String, user: String? = nil, once: Bool, ttl: UInt32 = 600) throws -> PushAck {
        let reply = try request(.push(Push(target: target, id: Array(id.utf8), ttlSeconds: ttl, user: user, once: once)))
        guard case .pushAck(let ack) = reply else { throw ServiceError.failed("PUSH \(id) refused: \(reply)") }
        return ack
    }
}

/// `securepush gateway --loops 4`: a PUSH with `once` repeated through a provider whose
/// connection another loop serves ([4.13-12]), and `user` across the loops ([4.13-11]).
@Suite("A gateway on several loop threads: PUSH's user and once", .ownThread)
struct GatewayLoopsOnceProcessTests {
    static let loops = GatewayLoopsProcessTests.loops

    /// Connections open on each loop, from the per-loop gauge of /metrics.
    static func loopConnections(_ gateway: GatewayProcess) -> [Int: Int] {
        var counts: [Int: Int] = [:]
        let prefix = "securepush_gateway_loop_connections{loop=\""
        for line in ((try? gateway.scrapeMetrics()) ?? "").split(separator: "\n") where line.hasPrefix(prefix) {
            let rest = line.dropFirst(prefix.count)
            guard let quote = rest.firstIndex(of: "\""), let loop = Int(rest[..<quote]),
                  let value = Double(rest[rest.index(quote, offsetBy: 3)...]) else { continue }
            counts[loop] = Int(value)
        }
        return counts
    }

    /// A provider connection and the loop that serves it: the one whose connection count
    /// went up by one as it connected (providers stay on the loop that accepted them).
    static func locatedProvider(_ gateway: GatewayProcess) throws -> (client: BlockingWireClient, loop: Int?) {
        let before = loopConnections(gateway)
        let client = try gateway.provider()
        var loop: Int?
        waitUntil {
            let after = loopConnections(gateway)
            let grown = after.filter { $0.value == (before[$0.key] ?? 0) + 1 }
            let others = after.filter { $0.value != (before[$0.key] ?? 0) }
            if grown.count == 1, others.count == 1 { loop = grown.first?.key }
            return loop != nil
        }
        return (client, loop)
    }

    /// Two providers served by different loops.
    static func providersOnTwoLoops(_ gateway: GatewayProcess) throws -> (BlockingWireClient, BlockingWireClient) {
        let (first, firstLoop) = try locatedProvider(gateway)
        try #require(firstLoop != nil, "the first provider's loop is known")
        for _ in 0..<24 {
            let (other, loop) = try locatedProvider(gateway)
            if let loop, loop != firstLoop { return (first, other) }
        }
        throw ServiceError.failed("24 provider connections in a row landed on loop \(firstLoop ?? -1)")
    }

    /// The push ids a device gets up to `last` (or until none comes for 3 s), each
    /// acknowledged; probes and MISSED (for probes dropped as a device left) left out.
    static func ids(_ device: BlockingWireClient, until last: String) -> [String] {
        var seen: [String] = []
        for _ in 0..<1_000 {
            guard seen.last != last, let next = try? device.nextPush() else { break }
            guard case .push(let push) = next.message else { continue }
            let id = String(decoding: push.id, as: UTF8.self)
            if !id.hasPrefix("probe") { seen.append(id) }
        }
        return seen
    }

    @Test("[4.13-12] [4.13-11] a repeat entering at another loop is delivered nowhere again and gets the summed first counts")
    func repeatAtAnotherLoop() throws {
        let gateway = try GatewayProcess(arguments: ["--loops", "\(Self.loops)", "--metrics", "127.0.0.1:0"])
        let ids = GatewayLoopsProcessTests.spreadIDs("bob-once", count: 12)
        let devices = try ids.map { try gateway.device($0, user: "bob", tags: ["news"]) }
        let alice = try gateway.device("alice-once", user: "alice", tags: ["news"])
        let (viaFirst, viaOther) = try Self.providersOnTwoLoops(gateway)

        // A third of bob's devices leave; the gateway has seen it once a probe reaches the
        // other 9 with the tag (8 of bob's and alice's).
        for device in devices.prefix(4) { device.shutdownWrite() }
        var probe = 0
        #expect(waitUntil {
            probe += 1
            return (try? gateway.push(.tag("news"), id: "probe-\(probe)", via: viaFirst, ttl: 0))?.written == 9
        }, "the gateway saw 4 devices leave")

        let first = try viaFirst.push(.tag("news"), id: "once-1", user: "bob", once: true)
        #expect(first == PushAck(written: 8, queued: 4), "alice's device has the tag but is not bob's")
        #expect(try viaOther.push(.tag("news"), id: "once-1", user: "bob", once: true) == first, "entering at another loop")
        #expect(try viaFirst.push(.tag("news"), id: "once-1", user: "bob", once: true) == first)
        #expect(try viaOther.push(.device(ids[5]), id: "once-2", once: true) == PushAck(written: 1, queued: 0))
        #expect(try viaFirst.push(.device(ids[5]), id: "once-2", once: true) == PushAck(written: 1, queued: 0))

        #expect(try gateway.push(.user("bob"), id: "after", via: viaOther) == PushAck(written: 8, queued: 4))
        for (index, device) in devices.enumerated().dropFirst(4) {
            #expect(Self.ids(device, until: "after") == (index == 5 ? ["once-1", "once-2", "after"] : ["once-1", "after"]), "\(ids[index])")
        }
        for id in ids.prefix(4) {
            #expect(Self.ids(try gateway.device(id, user: "bob", tags: ["news"]), until: "after") == ["once-1", "after"],
                    "\(id) queued it once")
        }
        #expect(try gateway.push(.device("alice-once"), id: "for-alice", via: viaFirst) == PushAck(written: 1, queued: 0))
        #expect(Self.ids(alice, until: "for-alice") == ["for-alice"])

        var text = ""
        #expect(waitUntil {
            text = (try? gateway.scrapeMetrics()) ?? ""
            // Each tag repeat answered by all four loops' shares, each device repeat by its home.
            return text.contains("securepush_gateway_pushes_repeated_total 9")
        }, "\(text.split(separator: "\n").filter { $0.contains("repeated") || $0.contains("once") })")
        #expect(text.contains("securepush_gateway_once_ids_remembered 5"), "once-1 on every loop, once-2 on its home")
    }
}
