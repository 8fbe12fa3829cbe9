import PushWire
import PushSession

/// Which devices a PUSH matches, queue overflow, the delivery window, DELIVERY_ACK
/// checking, what a closed connection puts back, and what counts into MISSED (4.13-6 to
/// 4.13-10, 4.14-5 to 4.14-8, 4.15-3, 4.4-5).
extension GatewayFixture {
    /// What a device receives until the gateway goes quiet: MISSED counts and PUSH ids, in
    /// order, each PUSH acknowledged if asked.
    struct Received {
        var missed: UInt32 = 0
        /// How many MISSED frames brought `missed`.
        var missedFrames = 0
        var ids: [String] = []
        /// The correlation id of each PUSH in `ids`.
        var correlations: [UInt32] = []
        var missedAfterPush = false
    }

    func receiveAll(_ device: WireSession, acknowledge: Bool, limit: Int = 300, _ what: String) throws(CaseStop) -> Received {
        var received = Received()
        for _ in 0..<limit {
            guard let frame = try device.pollFrame(timeoutMs: ctx.quietMs, waitingFor: what) else { return received }
            switch try device.decode(frame, what) {
            case .missed(let report):
                if !received.ids.isEmpty { received.missedAfterPush = true }
                received.missed += report.missedCount
                received.missedFrames += 1
            case .push(let push):
                received.ids.append(String(decoding: push.id, as: UTF8.self))
                received.correlations.append(frame.header.correlation)
                if acknowledge { try device.send(.deliveryAck(DeliveryAck(id: push.id)), correlation: frame.header.correlation) }
            case let other:
                throw .fail("\(what): the device got \(describe(other))")
            }
        }
        throw .fail("\(what): the device got more than \(limit) frames")
    }
}

extension GatewayCases {
    /// Pushes sent to one connected device that acknowledges none, in the delivery
    /// window cases.
    static let windowProbe = 200

    /// Pushes `windowProbe` pushes to a connected device that reads and acknowledges
    /// nothing; returns the device and how many of the PUSH_ACKs said written.
    static func fillWindow(_ gateway: GatewayFixture, _ ctx: CaseContext, id: String? = nil) throws(CaseStop) -> (device: WireSession, written: Int) {
        let id = id ?? ctx.unique("dev")
        let device = try gateway.device(id)
        var written = 0
        var firstQueued: Int?
        for index in 0..<windowProbe {
            let ack = try gateway.push(.device(id), id: "w\(index)")
            switch (ack.written, ack.queued) {
            case (1, 0) where firstQueued == nil:
                written += 1
            case (0, 1):
                if firstQueued == nil { firstQueued = index }
            default:
                throw .fail("push \(index) to one connected device got PUSH_ACK \(ack.written)/\(ack.queued)" + (firstQueued.map { " after push \($0) was queued" } ?? ""))
            }
        }
        guard firstQueued != nil else {
            throw .fail("all \(windowProbe) pushes to a device that acknowledged none were written at once: no delivery window")
        }
        guard written > 0 else { throw .fail("the first push to a connected device with nothing in flight was queued, not written") }
        return (device, written)
    }

    /// `fillWindow`, then everything the device receives before it acknowledges anything:
    /// exactly the pushes PUSH_ACK said were written, and MISSED for what the queue dropped
    /// behind them ([4.15-1]).
    static func fillAndRead(_ gateway: GatewayFixture, _ ctx: CaseContext, id: String? = nil) throws(CaseStop)
        -> (device: WireSession, written: Int, held: GatewayFixture.Received) {
        let (device, written) = try fillWindow(gateway, ctx, id: id)
        let held = try gateway.receiveAll(device, acknowledge: false, "pushes and MISSED before any DELIVERY_ACK")
        try Expect.equal(held.ids.count, written, "pushes received before any DELIVERY_ACK against PUSH_ACKs that said written")
        return (device, written, held)
    }

    /// The largest PUSH a gateway writes to a device ([4.14-1]): an id and a collapse key
    /// of 64 bytes each, the key unique so that nothing collapses ([4.13-5]).
    static func largePush(_ index: Int, _ ctx: CaseContext) -> (id: String, collapseKey: String) {
        func padded(_ text: String) -> String { text + String(repeating: "x", count: max(0, 64 - text.utf8.count)) }
        return (padded("b\(index)-"), padded(ctx.unique("k\(index)-")))
    }

    static let delivery: [ConformanceCase] = [
        ConformanceCase("gateway.target-after-role", clause: "4.13-6", "a PUSH without target is well-formed: FORBIDDEN from a device, BAD_REQUEST from a provider") { ctx throws(CaseStop) in
            let device = try ctx.gatewayDevice(ctx.unique("dev"), user: ctx.unique("user"))
            try Expect.refused(device, .push(Push(target: nil, id: [7])), .forbidden, "PUSH without target from a device")
            let provider = try ctx.gatewayProvider()
            try Expect.refused(provider, .push(Push(target: nil, id: [7])), .badRequest, "PUSH without target from a provider")
            return "device → FORBIDDEN (role first); provider → BAD_REQUEST"
        },

        ConformanceCase("gateway.match-known", clause: "4.13-7", "devices match by their latest registration, connected or not; unknown devices never") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let id = ctx.unique("dev"), oldTag = ctx.unique("tag"), newTag = ctx.unique("tag")
            try gateway.disconnect(try gateway.device(id, tags: [oldTag]))
            let offline = try gateway.push(.tag(oldTag), id: "old-tag")
            try Expect.that(offline.written == 0 && offline.queued == 1, "a tag of an offline device got PUSH_ACK \(offline.written)/\(offline.queued), expected 0/1")
            let never = try gateway.push(.device(ctx.unique("never")), id: "never")
            try Expect.that(never.written == 0 && never.queued == 0, "a device id never seen got PUSH_ACK \(never.written)/\(never.queued), expected 0/0")
            let again = try gateway.device(id, tags: [newTag])
            _ = try gateway.receiveAll(again, acknowledge: true, "the push queued under the old registration")
            try gateway.disconnect(again)
            let stale = try gateway.push(.tag(oldTag), id: "stale")
            try Expect.that(stale.written == 0 && stale.queued == 0, "the device's previous tag still matched after it reconnected without it: \(stale.written)/\(stale.queued)")
            let current = try gateway.push(.tag(newTag), id: "current")
            try Expect.that(current.written == 0 && current.queued == 1, "the device's new tag got PUSH_ACK \(current.written)/\(current.queued), expected 0/1")
            return "offline device matched (0/1); unknown id 0/0; after re-registering, old tag 0/0 and new tag 0/1"
        },

        ConformanceCase("gateway.overflow-oldest", clause: "4.13-9", "a full queue drops its oldest push") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let id = ctx.unique("dev")
            try gateway.disconnect(try gateway.device(id))
            let sent = (0..<8).map { "q\($0)" }
            for push in sent { try gateway.push(.device(id), id: push) }
            let back = try gateway.device(id)
            let got = try gateway.receiveAll(back, acknowledge: true, "the queued pushes")
            if got.missed == 0 && got.ids == sent { throw .skip("the queue held all \(sent.count) pushes; overflow is not observable with a queue this large") }
            try Expect.that(!got.missedAfterPush, "MISSED came after a push, not first [4.14-8]")
            try Expect.equal(Int(got.missed) + got.ids.count, sent.count, "MISSED count plus pushes delivered")
            try Expect.equal(got.ids, Array(sent.suffix(got.ids.count)), "pushes kept by a full queue")
            return "8 queued: MISSED \(got.missed), then the newest \(got.ids.count): \(got.ids.joined(separator: ", "))"
        },

        ConformanceCase("gateway.window-counted-queued", clause: "4.13-10", "a push for a connected device with a full delivery window counts as queued") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let (device, written) = try fillWindow(gateway, ctx)
            let got = try gateway.receiveAll(device, acknowledge: false, "the pushes written")
            try Expect.equal(got.ids.count, written, "pushes the device received against PUSH_ACKs that said written")
            return "\(written) PUSH_ACKs 1/0, then 0/1 for the rest; the device received \(got.ids.count)"
        },

        ConformanceCase("gateway.delivery-window", clause: "4.14-5", "at most the delivery window is unacknowledged; each DELIVERY_ACK lets one more out") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let (device, written, held) = try fillAndRead(gateway, ctx)
            try device.send(.deliveryAck(DeliveryAck(id: Array(held.ids[0].utf8))), correlation: held.correlations[0])
            let next = try gateway.receiveAll(device, acknowledge: false, "the push one DELIVERY_ACK lets out")
            try Expect.equal(next.ids.count, 1, "pushes one DELIVERY_ACK let out of a full window")
            return "window \(written): no push more while full (MISSED \(held.missed) for the queue's overflow); one DELIVERY_ACK → one more push (\(next.ids[0]))"
        },

        ConformanceCase("gateway.window-bytes", clause: "4.14-5", "the delivery window bounds unacknowledged pushes in bytes (the output cap) as well as in number") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let (window, cap) = (ctx.options.gatewayDeliveryWindow, ctx.options.gatewayMaxOutputBytes)
            let probe = largePush(0, ctx)
            // What the device gets: the provider's PUSH without the fields 4.14-1 leaves out.
            let frame = Push(target: nil, id: Array(probe.id.utf8), collapseKey: probe.collapseKey).deviceFrame(correlation: 1)
            let expected = min(window, cap / frame.count)
            guard expected < windowProbe else { throw .skip("a window of \(expected) pushes of \(frame.count) bytes is more than the case sends (\(windowProbe))") }
            let id = ctx.unique("dev")
            let device = try gateway.device(id)
            var written = 0
            for index in 0..<(expected + 4) {
                let push = largePush(index, ctx)
                let ack = try gateway.push(.device(id), id: push.id, collapseKey: push.collapseKey)
                written += Int(ack.written)
            }
            try Expect.equal(written, expected, "pushes of \(frame.count) bytes written to a device that acknowledges none, with a window of \(window) pushes and \(cap) bytes")
            let got = try gateway.receiveAll(device, acknowledge: false, "the pushes inside the window")
            try Expect.equal(got.ids.count, expected, "pushes the device received")
            try device.expectAlive("a device whose window is full and which reads what it is sent")
            let bound = expected == window ? "in number" : "in bytes"
            return "\(expected) pushes of \(frame.count) bytes written (window \(window) pushes, \(cap) bytes: full \(bound)); the rest queued; the device still served"
        },

        ConformanceCase("gateway.missed-while-connected", clause: "4.15-1", "pushes a connected device's queue drops while its window is full are reported at once, before any DELIVERY_ACK") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let (device, written, before) = try fillAndRead(gateway, ctx)
            for (id, correlation) in zip(before.ids, before.correlations) {
                try device.send(.deliveryAck(DeliveryAck(id: Array(id.utf8))), correlation: correlation)
            }
            let after = try gateway.receiveAll(device, acknowledge: true, "the queued pushes")
            let missed = Int(before.missed + after.missed)
            try Expect.equal(written + after.ids.count + missed, windowProbe, "pushes delivered plus MISSED counts")
            guard missed > 0 else { throw .skip("the queue held all \(windowProbe - written) pushes behind the window; nothing was dropped") }
            try Expect.that(before.missed > 0, "none of the \(missed) dropped pushes was reported before the device acknowledged")
            return "window \(written), then MISSED \(before.missed) while connected with nothing acknowledged; then \(after.ids.count) queued pushes and MISSED \(after.missed)"
        },

        ConformanceCase("gateway.missed-one-unread", clause: "4.15-5", "a device that reads and acknowledges nothing gets one MISSED however many pushes are dropped; the rest of the count comes once it acknowledges a push written after it") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let (device, written, before) = try fillAndRead(gateway, ctx)
            guard before.missed > 0 else { throw .skip("the queue held all \(windowProbe - written) pushes behind the window; nothing was dropped") }
            try Expect.equal(before.missedFrames, 1, "MISSED frames before any DELIVERY_ACK (counts \(before.missed) in all)")
            for (id, correlation) in zip(before.ids, before.correlations) {
                try device.send(.deliveryAck(DeliveryAck(id: Array(id.utf8))), correlation: correlation)
            }
            let after = try gateway.receiveAll(device, acknowledge: true, "the queued pushes and the rest of the count")
            try Expect.equal(written + after.ids.count + Int(before.missed + after.missed), windowProbe, "pushes delivered plus MISSED counts")
            try Expect.that(after.missedFrames <= 1, "\(after.missedFrames) MISSED frames after the acknowledgements, expected the held count in one")
            return "window \(written): one MISSED (\(before.missed)) unacknowledged; after acknowledging, \(after.ids.count) pushes and MISSED \(after.missed) in \(after.missedFrames) frame"
        },

        ConformanceCase("gateway.stalled-reader", clause: "5.5-7", "a device that stops reading is closed with GOAWAY SLOW_CONSUMER after the stall limit; one that reads and does not acknowledge stays") { ctx throws(CaseStop) in
            let stallMs = ctx.options.gatewayOutputStallMs
            guard stallMs > 0 else { throw .skip("the gateway has the stall rule turned off (--gateway-output-stall-ms 0)") }
            guard stallMs <= 5_000 || ctx.options.slow else {
                throw .skip("waits the stall limit (\(stallMs) ms): run with --slow, or against a gateway with --output-stall-ms 5000 or less and --gateway-output-stall-ms")
            }
            guard ctx.options.tls == nil else { throw .skip("needs a small receive buffer, which the suite sets on plain TCP connections only") }
            let gateway = try GatewayFixture(ctx)
            let stalledID = ctx.unique("dev"), readingID = ctx.unique("dev")
            // A 2 KiB receive buffer holds a few of the pushes: the rest wait at the gateway.
            let stalled = try gateway.device(stalledID, receiveBufferBytes: 2048)
            let reading = try gateway.device(readingID)
            var written = 0
            for index in 0..<windowProbe {
                let push = largePush(index, ctx)
                written += Int(try gateway.push(.device(stalledID), id: push.id, collapseKey: push.collapseKey).written)
                try gateway.push(.device(readingID), id: push.id, collapseKey: push.collapseKey)
                if index % 20 == 19 { _ = try gateway.receiveAll(reading, acknowledge: false, "pushes to the device that reads") }
            }
            // The limit, then what 5.5-7 allows late (half the limit and two checks of at most
            // 1 s), then the suite's own slack; only then does the stalled device read.
            Pause.sleep(ms: Int(stallMs + stallMs / 2 + 2_000 + ctx.options.timerSlackMs))
            _ = try gateway.receiveAll(reading, acknowledge: false, "pushes to the device that reads")
            try reading.expectAlive("a device that read every push and acknowledged none, for the stall limit and more")
            let last = try stalled.expectClosed(within: 2_000, "a device that stopped reading, \(stallMs) ms stall limit")
            let pushes = last.filter { if case .push = $0 { true } else { false } }.count
            guard case .goaway(let goaway)? = last.last, goaway.status == .slowConsumer else {
                throw .fail("the stalled device's connection ended with \(last.last.map(describe) ?? "nothing"), expected GOAWAY SLOW_CONSUMER")
            }
            return "stopped reading after HELLO_OK: \(pushes) of \(written) pushes written readable, then GOAWAY SLOW_CONSUMER and close; the device that read and acknowledged nothing still served"
        },

        ConformanceCase("gateway.missed-told-again", clause: "4.15-4", "a MISSED on a connection that closes with pushes unacknowledged is counted again in the next one") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let id = ctx.unique("dev")
            let (device, written, before) = try fillAndRead(gateway, ctx, id: id)
            guard before.missed > 0 else { throw .skip("the queue held all \(windowProbe - written) pushes behind the window; nothing was dropped") }
            try gateway.disconnect(device)
            let again = try gateway.device(id)
            let after = try gateway.receiveAll(again, acknowledge: true, "MISSED and the pushes kept, on the next connection")
            try Expect.that(!after.missedAfterPush, "MISSED came after a push, not first [4.14-8]")
            try Expect.equal(Int(after.missed) + after.ids.count, windowProbe, "the next connection's MISSED count plus its pushes, against the \(windowProbe) sent")
            return "MISSED \(before.missed) unacknowledged, then closed; next connection: MISSED \(after.missed) + \(after.ids.count) pushes = \(windowProbe)"
        },

        ConformanceCase("gateway.ack-id-checked", clause: "4.14-6", "a DELIVERY_ACK with the right correlation but another id acknowledges nothing") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let id = ctx.unique("dev")
            let device = try gateway.device(id)
            try gateway.push(.device(id), id: "real")
            let (correlation, _) = try gateway.nextPush(device, acknowledge: false, "the push")
            try device.send(.deliveryAck(DeliveryAck(id: Array("other".utf8))), correlation: correlation)
            try device.expectAlive("a DELIVERY_ACK with the wrong id")
            try gateway.disconnect(device)
            let back = try gateway.device(id)
            try Expect.equal(try gateway.nextPushID(back, "the push acknowledged with the wrong id"), "real", "redelivered push")
            return "the push came again after a DELIVERY_ACK naming another id"
        },

        ConformanceCase("gateway.unacked-requeued", clause: "4.14-7", "pushes unacknowledged at close go back ahead of the queue; overflow counts as missed") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let id = ctx.unique("dev")
            let device = try gateway.device(id)
            try gateway.push(.device(id), id: "a")
            try gateway.push(.device(id), id: "b")
            _ = try gateway.nextPush(device, acknowledge: false, "push a")
            _ = try gateway.nextPush(device, acknowledge: false, "push b")
            try gateway.disconnect(device)
            let ack = try gateway.push(.device(id), id: "c")
            try Expect.that(ack.written == 0 && ack.queued == 1, "a push for the offline device got PUSH_ACK \(ack.written)/\(ack.queued)")
            let back = try gateway.device(id)
            let got = try gateway.receiveAll(back, acknowledge: true, "the pushes after reconnecting")
            try Expect.that(!got.missedAfterPush, "MISSED came after a push, not first [4.14-8]")
            try Expect.equal(Int(got.missed) + got.ids.count, 3, "MISSED count plus pushes delivered, of a, b (unacknowledged) and c (queued)")
            try Expect.equal(got.ids, Array(["a", "b", "c"].suffix(got.ids.count)), "order after reconnecting")
            return "after reconnecting: " + (got.missed > 0 ? "MISSED \(got.missed), " : "") + got.ids.joined(separator: ", ")
        },

        ConformanceCase("gateway.flush-order", clause: "4.14-8", "a push put back at close goes out before a queued push of higher priority") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let id = ctx.unique("dev")
            let device = try gateway.device(id)
            try gateway.push(.device(id), id: "put-back", priority: 1)
            _ = try gateway.nextPush(device, acknowledge: false, "the push left unacknowledged")
            try gateway.disconnect(device)
            try gateway.push(.device(id), id: "urgent", priority: 9)
            let back = try gateway.device(id)
            let got = try gateway.receiveAll(back, acknowledge: true, "the pushes after reconnecting")
            if got.missed > 0 { throw .skip("the gateway's queue could not hold two pushes (MISSED \(got.missed)); order not judged") }
            try Expect.equal(got.ids, ["put-back", "urgent"], "order after reconnecting")
            return "put-back (priority 1, unacknowledged) before urgent (priority 9, queued)"
        },

        ConformanceCase("gateway.missed-counting", clause: "4.15-3", "collapsed pushes and ttl_s 0 pushes to an offline device do not count as missed") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let id = ctx.unique("dev")
            try gateway.disconnect(try gateway.device(id))
            try gateway.push(.device(id), id: "zero", ttl: 0)
            try gateway.push(.device(id), id: "old", collapseKey: "k")
            try gateway.push(.device(id), id: "new", collapseKey: "k")
            let back = try gateway.device(id)
            let got = try gateway.receiveAll(back, acknowledge: true, "the pushes after reconnecting")
            try Expect.equal(got.missed, 0, "missed_count after a ttl_s 0 push and a collapsed push")
            try Expect.equal(got.ids, ["new"], "pushes delivered")
            return "no MISSED; only the newer collapsed push delivered"
        },

        ConformanceCase("gateway.replaced-last-correlation", clause: "4.4-5", "GOAWAY REPLACED names the last request the older connection processed") { ctx throws(CaseStop) in
            let id = ctx.unique("dev"), user = ctx.unique("user")
            let older = try ctx.gatewayDevice(id, user: user)
            for _ in 0..<2 {
                let answer = try older.request(.ping)
                try Expect.that(answer == .pong, "PING was answered \(describe(answer))")
            }
            // HELLO was request 1, the PINGs 2 and 3.
            _ = try ctx.gatewayDevice(id, user: user)
            let goaway = try Expect.goawayThenClose(older, .replaced, "a second connection for the device")
            try Expect.equal(goaway.lastCorrelation, 3, "last_correlation after HELLO 1 and PINGs 2 and 3")
            return "GOAWAY REPLACED last_correlation 3"
        },
    ]
}
