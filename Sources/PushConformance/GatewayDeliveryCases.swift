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
        var ids: [String] = []
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
            case .push(let push):
                received.ids.append(String(decoding: push.id, as: UTF8.self))
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
    static func fillWindow(_ gateway: GatewayFixture, _ ctx: CaseContext) throws(CaseStop) -> (device: WireSession, written: Int) {
        let id = ctx.unique("dev")
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
        return (device, written)
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
            let (device, written) = try fillWindow(gateway, ctx)
            var outstanding: [(UInt32, [UInt8])] = []
            for _ in 0..<written {
                let (correlation, push) = try gateway.nextPush(device, acknowledge: false, "a push inside the window")
                outstanding.append((correlation, push.id))
            }
            try device.expectSilence(ms: ctx.quietMs, "a full delivery window of \(written)")
            try device.send(.deliveryAck(DeliveryAck(id: outstanding[0].1)), correlation: outstanding[0].0)
            // Pushes beyond the window may have overflowed a small queue: a MISSED for them
            // may come first ([4.15-3]).
            var (_, answer) = try device.next(waitingFor: "the push one DELIVERY_ACK lets out")
            if case .missed = answer { (_, answer) = try device.next(waitingFor: "the push one DELIVERY_ACK lets out, after MISSED") }
            guard case .push(let next) = answer else { throw .fail("the push one DELIVERY_ACK lets out: the device got \(describe(answer)), expected PUSH") }
            try device.expectSilence(ms: ctx.quietMs, "a window full again after one DELIVERY_ACK")
            return "window \(written): silent when full; one DELIVERY_ACK → one more push (\(String(decoding: next.id, as: UTF8.self)))"
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
