import Testing
import PushClient
@testable import PushGateway
import PushTestSupport
import PushWire

/// Ids of the maximum length (64 bytes), numbered, so that a few dozen pushes pass an
/// output cap of a few KiB: 78 bytes a PUSH frame.
func longID(_ prefix: String, _ index: Int) -> String {
    let head = "\(prefix)-\(index)-"
    return head + String(repeating: "x", count: 64 - head.utf8.count)
}

extension GatewayUnderTest {
    /// PUSHes pipelined in batches; the PUSH_ACK of each, in order.
    func pushAll(_ ids: [String], to target: PushTarget, via provider: BlockingWireClient, ttl: UInt32 = 600) throws -> [PushAck] {
        var acks: [PushAck] = []
        var start = 0
        while start < ids.count {
            let batch = ids[start..<min(start + 200, ids.count)]
            var correlations: [UInt32] = []
            for id in batch { correlations.append(try provider.send(.push(Push(target: target, id: Array(id.utf8), ttlSeconds: ttl)))) }
            for correlation in correlations {
                guard case .pushAck(let ack) = try provider.reply(to: correlation) else { throw ServiceError.failed("PUSH refused") }
                acks.append(ack)
            }
            start += batch.count
        }
        return acks
    }
}

extension BlockingWireClient {
    /// Reads and acknowledges PUSHes until `total` pushes are accounted for, delivered or
    /// counted by MISSED: the ids delivered, in order, and the MISSED total. Stops early
    /// (so that a failing test still reports its figures) if the gateway goes quiet for
    /// the read timeout or closes the connection.
    func collect(accountingFor total: Int) -> (ids: [String], missed: Int) {
        var ids: [String] = []
        var missed = 0
        while ids.count + missed < total {
            guard let next = try? nextPush() else { break }
            switch next.message {
            case .push(let push): ids.append(String(decoding: push.id, as: UTF8.self))
            case .missed(let report): missed += Int(report.missedCount)
            default: return (ids, missed)  // GOAWAY
            }
        }
        return (ids, missed)
    }
}

/// Metrics text: the value of one counter or gauge.
func metricValue(_ text: String, _ name: String) -> Int? {
    for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
        return Int(Double(line.dropFirst(name.count + 1)) ?? -1)
    }
    return nil
}

/// Issue 11, items 3 to 5: nothing a device was sent is lost when its connection ends,
/// backlogs are paced by the delivery window, DELIVERY_ACK must name the push.
@Suite("Gateway delivery: window, requeue, acknowledgement", .ownThread)
struct GatewayDeliveryTests {
    @Test("a backlog of 1,000 pushes larger than the default output cap (queue capacity 1000) is paced by the window: HELLO_OK, then all 1,000 once, in order, no cut")
    func bigBacklogIsPaced() throws {
        let gateway = try RunningGateway { $0.queueCapacity = 1000 }
        let provider = try gateway.provider()
        try gateway.knownOffline("phone")
        let ids = (0..<1000).map { longID("b", $0) }
        let acks = try gateway.pushAll(ids, to: .device("phone"), via: provider)
        #expect(acks.allSatisfy { $0 == PushAck(written: 0, queued: 1) })
        // 1,000 PUSH frames of 78 bytes: more than the 64 KiB cap if written at once.

        let phone = try gateway.device("phone")  // HELLO_OK comes: the device was not cut before it could read
        var first: [String] = []
        var correlations: [UInt32] = []
        for _ in 0..<64 {
            let (correlation, message) = try phone.nextPush(acknowledge: false)
            guard case .push(let push) = message else { Issue.record("not a PUSH: \(message)"); return }
            first.append(String(decoding: push.id, as: UTF8.self))
            correlations.append(correlation)
        }
        // The gateway wrote these 64 before the device read them, and can write no more
        // until an acknowledgement: the window holds.
        let held = gateway.service.onLoop { service -> (inFlight: Int, queued: Int)? in
            service.logic.devices["phone"].map { ($0.inFlight.count, $0.queue.count) }
        }.flatMap { $0 }
        #expect(held?.inFlight == 64 && held?.queued == 936, "\(String(describing: held))")
        #expect(first == Array(ids.prefix(64)))

        for (correlation, id) in zip(correlations, first) {
            try phone.send(.deliveryAck(DeliveryAck(id: Array(id.utf8))), correlation: correlation)
        }
        let rest = phone.collect(accountingFor: 936)
        print("figures: backlog 1000, window 64: first read \(first.count) unacknowledged, gateway held \(held.map { "\($0.inFlight) in flight, \($0.queued) queued" } ?? "?"); then \(rest.ids.count) more, MISSED \(rest.missed)")
        #expect(rest.missed == 0)
        #expect(first + rest.ids == ids, "all 1,000 once, in the order they were sent")
        #expect(try gateway.push(.device("phone"), id: "marker", via: provider) == PushAck(written: 1, queued: 0))
        #expect(try phone.nextPushID() == "marker", "nothing else was pending")
        let text = gateway.metricsText
        #expect(metricValue(text, "securepush_gateway_slow_consumers_cut_total") == 0)
        #expect(metricValue(text, "securepush_gateway_pushes_written_total") == 1001)
    }

    @Test("[5.5-4] a device that never reads is not cut for the gateway's own pushes passing the cap; the others keep receiving; when it goes away, each push sent to it is delivered once on its next connection or counted in MISSED")
    func stalledDeviceLosesNothing() throws {
        // The stall rule ([5.5-7]) off: this is about the cap and what the close puts back.
        let gateway = try RunningGateway {
            $0.maxOutputBytes = 4096
            $0.outputStallMs = 0
        }
        var stalled: BlockingWireClient? = try gateway.device("stalled", tags: ["all"], receiveBufferBytes: 2048)
        let healthy = try gateway.device("healthy", tags: ["all"])
        let provider = try gateway.provider()
        var sent: [String] = []
        var stalledQueued = 0
        for round in 0..<30 {
            let ids = (0..<50).map { longID("r\(round)", $0) }
            sent += ids
            var correlations: [UInt32] = []
            for id in ids { correlations.append(try provider.send(.push(Push(target: .tag("all"), id: Array(id.utf8))))) }
            for id in ids { #expect(try healthy.nextPushID() == id) }
            for correlation in correlations {
                guard case .pushAck(let ack) = try provider.reply(to: correlation) else { Issue.record("PUSH refused"); return }
                #expect(ack.written + ack.queued == 2, "both devices accounted for: \(ack)")
                stalledQueued += Int(ack.queued)
            }
        }
        #expect(stalledQueued > 0, "the stalled device's pushes waited once its window or output was full")
        let held = gateway.service.onLoop { service -> (Int, Int)? in
            guard let record = service.logic.devices["stalled"] else { return nil }
            return (record.inFlight.count, record.queue.count)
        }.flatMap { $0 }
        #expect(held.map { $0.0 <= 64 && $0.1 <= 100 } == true, "bounded: window and queue capacity, \(String(describing: held))")
        #expect(gateway.service.isOnline("stalled"), "not cut")

        stalled = nil  // closes with unread data: a reset
        #expect(waitUntil { gateway.service.isOffline("stalled") })
        let back = try gateway.device("stalled", tags: ["all"])
        let (ids, missed) = back.collect(accountingFor: sent.count)
        print("figures: stalled device, cap 4096: \(sent.count) sent, \(stalledQueued) acknowledged to the provider as queued, gateway held \(String(describing: held)); next connection: \(ids.count) delivered (\(Set(ids).count) distinct) + \(missed) in MISSED")
        #expect(Set(ids).count == ids.count, "no push delivered twice")
        #expect(Set(ids).isSubset(of: Set(sent)))
        #expect(ids.count + missed == sent.count, "\(ids.count) delivered + \(missed) in MISSED = \(sent.count) sent")
        #expect(try gateway.push(.device("stalled"), id: "marker", via: provider) == PushAck(written: 1, queued: 0))
        #expect(try back.nextPushID() == "marker", "nothing else was pending")
        let text = gateway.metricsText
        #expect(metricValue(text, "securepush_gateway_slow_consumers_cut_total") == 0)
        #expect((metricValue(text, "securepush_gateway_pushes_requeued_total") ?? 0) > 0)
    }

    @Test("[4.14-3] a connection closed by the gateway (a framing error) with pushes in flight: they come again on the next one, same correlations, once")
    func closedWithPushesInFlight() throws {
        let gateway = try RunningGateway()
        let provider = try gateway.provider()
        let first = try gateway.device("phone")
        let ids = (0..<5).map { "p\($0)" }
        #expect(try gateway.pushAll(ids, to: .device("phone"), via: provider).allSatisfy { $0 == PushAck(written: 1, queued: 0) })
        var correlations: [UInt32] = []
        for _ in ids { correlations.append(try first.nextPush(acknowledge: false).correlation) }
        try first.sendRaw([0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F])
        #expect(first.waitForClose())
        #expect(waitUntil { gateway.service.isOffline("phone") })
        let second = try gateway.device("phone")
        var again: [(UInt32, String)] = []
        for _ in ids {
            let (correlation, message) = try second.nextPush()
            guard case .push(let push) = message else { Issue.record("got \(message)"); return }
            again.append((correlation, String(decoding: push.id, as: UTF8.self)))
        }
        #expect(again.map(\.1) == ids && again.map(\.0) == correlations)
        #expect(try gateway.push(.device("phone"), id: "marker", via: provider) == PushAck(written: 1, queued: 0))
        #expect(try second.nextPushID() == "marker")
    }

    @Test("[4.14-2] over the wire, a DELIVERY_ACK with the PUSH's correlation and another id does not acknowledge it; it is counted and the push comes again")
    func wrongIDOverTheWire() throws {
        let gateway = try RunningGateway()
        let provider = try gateway.provider()
        let first = try gateway.device("phone")
        _ = try gateway.push(.device("phone"), id: "right", via: provider)
        let (correlation, _) = try first.nextPush(acknowledge: false)
        try first.send(.deliveryAck(DeliveryAck(id: Array("wrong".utf8))), correlation: correlation)
        #expect(waitUntil { metricValue(gateway.metricsText, "securepush_gateway_delivery_acks_mismatched_total") == 1 })
        #expect(metricValue(gateway.metricsText, "securepush_gateway_pushes_acknowledged_total") == 0)
        first.shutdownWrite()
        #expect(waitUntil { gateway.service.isOffline("phone") })
        let second = try gateway.device("phone")
        let again = try second.nextPush()
        #expect(again.correlation == correlation)
        guard case .push(let push) = again.message else { Issue.record("got \(again.message)"); return }
        #expect(push.id == Array("right".utf8))
        #expect(waitUntil { metricValue(gateway.metricsText, "securepush_gateway_pushes_acknowledged_total") == 1 })
    }
}

/// Items 3 and 4 of issue 11 as reported, against the real binary.
@Suite("The gateway binary: delivery under a small output cap and a big backlog", .ownThread)
struct GatewayDeliveryProcessTests {
    @Test("--max-output-bytes 4096, a device that does not read, 64 pushes: not cut, and all 64 arrive once on its next connection")
    func stalledDeviceThenReconnect() throws {
        let gateway = try GatewayProcess(arguments: ["--max-output-bytes", "4096", "--output-stall-ms", "0", "--metrics", "127.0.0.1:0"])
        let provider = try gateway.provider()
        var stalled: BlockingWireClient? = try gateway.device("phone", receiveBufferBytes: 2048)
        let ids = (0..<64).map { longID("s", $0) }
        let acks = try gateway.pushAll(ids, to: .device("phone"), via: provider)
        #expect(acks.allSatisfy { $0.written + $0.queued == 1 }, "each push written or queued")
        var text = try gateway.scrapeMetrics()
        #expect(metricValue(text, "securepush_gateway_slow_consumers_cut_total") == 0, "not cut for the gateway's own pushes")
        #expect(metricValue(text, "securepush_gateway_devices_online") == 1)

        stalled = nil  // goes away without having read anything
        #expect(waitUntil { metricValue((try? gateway.scrapeMetrics()) ?? "", "securepush_gateway_devices_online") == 0 })
        let back = try gateway.device("phone")
        let (delivered, missed) = back.collect(accountingFor: 64)
        print("figures: binary, cap 4096, 64 pushes to a device that does not read: PUSH_ACK written \(acks.map(\.written).reduce(0, +)), queued \(acks.map(\.queued).reduce(0, +)); next connection: \(delivered.count) delivered + \(missed) in MISSED")
        #expect(missed == 0)
        #expect(delivered == ids, "all 64 once, in order")
        #expect(try gateway.push(.device("phone"), id: "marker", via: provider) == PushAck(written: 1, queued: 0))
        #expect(try back.nextPushID() == "marker", "nothing else was pending")
        text = try gateway.scrapeMetrics()
        #expect(metricValue(text, "securepush_gateway_slow_consumers_cut_total") == 0)
        _ = stalled
    }

    @Test("""
        [4.14-5] [4.13-10] [4.15-1] [5.5-4] issue 29's slow consumer: --max-output-bytes 4096 --delivery-window 65536, a device that \
        reads and never acknowledges gets what its window holds in bytes, every later push is queued, the queue's overflow \
        comes as MISSED while it is connected (one frame until it has read it, [4.15-5]), nothing cuts it off; its \
        acknowledgements bring the rest
        """)
    func readsButNeverAcknowledges() throws {
        let gateway = try GatewayProcess(arguments: ["--max-output-bytes", "4096", "--delivery-window", "65536", "--metrics", "127.0.0.1:0"])
        let provider = try gateway.provider()
        let phone = try gateway.device("phone")
        let frameSize = Push(target: nil, id: Array(longID("n", 0).utf8)).deviceFrame(correlation: 1).count
        let fits = 4096 / frameSize
        let ids = (0..<(fits + 100 + 60)).map { longID("n", $0) }  // the window, a queue of 100, 60 more
        let acks = try gateway.pushAll(ids, to: .device("phone"), via: provider)
        #expect(acks.prefix(fits).allSatisfy { $0 == PushAck(written: 1, queued: 0) })
        #expect(acks.dropFirst(fits).allSatisfy { $0 == PushAck(written: 0, queued: 1) }, "behind a window full in bytes")

        // Read everything the gateway sends without acknowledging anything.
        var received: [(correlation: UInt32, id: [UInt8])] = []
        var missed = 0
        while let frame = try? phone.receive(timeoutMs: 500) {
            switch frame.message {
            case .push(let push): received.append((frame.header.correlation, push.id))
            case .missed(let report): missed += Int(report.missedCount)
            default: Issue.record("the device got \(frame.message)")
            }
        }
        print("figures: binary, cap 4096, window 65536, \(ids.count) pushes of \(frameSize) bytes to a device that reads and never acknowledges: \(received.count) written, MISSED \(missed) while connected")
        #expect(received.count == fits)
        #expect(missed == 1, "the queue of 100 dropped the 60 oldest: the first told at once, the rest held behind that unread MISSED [4.15-5]")
        var text = try gateway.scrapeMetrics()
        #expect(metricValue(text, "securepush_gateway_slow_consumers_cut_total") == 0)
        #expect(metricValue(text, "securepush_gateway_devices_online") == 1)

        for push in received { _ = try phone.send(.deliveryAck(DeliveryAck(id: push.id)), correlation: push.correlation) }
        let (rest, missedLater) = phone.collect(accountingFor: 100 + 59)
        #expect(missedLater == 59, "told with the first acknowledgement of a push written after the first MISSED")
        #expect(rest == Array(ids.suffix(100)), "the 100 kept, once, in order")
        text = try gateway.scrapeMetrics()
        #expect(metricValue(text, "securepush_gateway_slow_consumers_cut_total") == 0)
    }

    @Test("--queue-capacity 1000 and the default output cap: a reconnect with a backlog of 1,000 gets HELLO_OK and every push once, in order, without being cut")
    func bigBacklogReconnect() throws {
        let gateway = try GatewayProcess(arguments: ["--queue-capacity", "1000", "--metrics", "127.0.0.1:0"])
        let provider = try gateway.provider()
        try gateway.device("phone").shutdownWrite()
        #expect(waitUntil { metricValue((try? gateway.scrapeMetrics()) ?? "", "securepush_gateway_devices_online") == 0 })
        let ids = (0..<1000).map { longID("q", $0) }
        #expect(try gateway.pushAll(ids, to: .device("phone"), via: provider).allSatisfy { $0 == PushAck(written: 0, queued: 1) })
        let phone = try gateway.device("phone")
        let (delivered, missed) = phone.collect(accountingFor: 1000)
        print("figures: binary, queue 1000, default cap, backlog 1000: \(delivered.count) delivered (\(delivered == ids ? "in order" : "out of order")) + \(missed) in MISSED")
        #expect(missed == 0)
        #expect(delivered == ids)
        #expect(try gateway.push(.device("phone"), id: "marker", via: provider) == PushAck(written: 1, queued: 0))
        #expect(try phone.nextPushID() == "marker", "nothing else was pending")
        // The marker's DELIVERY_ACK is read by the gateway after the test has the marker.
        var text = ""
        #expect(waitUntil {
            text = (try? gateway.scrapeMetrics()) ?? text
            return metricValue(text, "securepush_gateway_pushes_acknowledged_total") == 1001
        }, "\(text)")
        #expect(metricValue(text, "securepush_gateway_slow_consumers_cut_total") == 0)
    }

    @Test("[5.5-7] --output-stall-ms is documented with its default and refuses what is out of range")
    func outputStallHelp() throws {
        let help = try SecurePushBinary.run(["gateway", "--help"])
        #expect(help.stdout.contains("--output-stall-ms"))
        #expect(help.stdout.contains("default: 10000"), "\(help.stdout)")
        let bad = try SecurePushBinary.run(["gateway", "--data-dir", "/nonexistent", "--output-stall-ms", "-1"])
        #expect(bad.status != 0 && bad.stderr.contains("--output-stall-ms"))
    }

    @Test("--delivery-window is documented with its default")
    func deliveryWindowHelp() throws {
        let help = try SecurePushBinary.run(["gateway", "--help"])
        #expect(help.stdout.contains("--delivery-window"))
        #expect(help.stdout.contains("default: 64"), "\(help.stdout)")
        let bad = try SecurePushBinary.run(["gateway", "--data-dir", "/nonexistent", "--delivery-window", "0"])
        #expect(bad.status != 0 && bad.stderr.contains("--delivery-window"))
    }
}
