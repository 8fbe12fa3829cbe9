import PushWire
import PushSession

/// Offline queues, the device form of PUSH, redelivery and MISSED (sections 4.13-5,
/// 4.14, 4.15).
extension GatewayCases {
    static let queues: [ConformanceCase] = [
        ConformanceCase("gateway.ttl-zero", clause: "4.13-5", "ttl_s 0 reaches connected devices only") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let id = ctx.unique("dev")
            try gateway.disconnect(try gateway.device(id))
            let ack = try gateway.push(.device(id), id: "now-or-never", ttl: 0)
            try Expect.that(ack.written == 0 && ack.queued == 0, "ttl_s 0 for an offline device got PUSH_ACK \(ack.written)/\(ack.queued)")
            let back = try gateway.device(id)
            try back.expectSilence(ms: ctx.quietMs, "reconnecting after a ttl_s 0 PUSH")
            return "PUSH_ACK 0/0 and nothing delivered on reconnect"
        },

        ConformanceCase("gateway.priority-order", clause: "4.13-5", "queued pushes of higher priority are sent first") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let id = ctx.unique("dev")
            try gateway.disconnect(try gateway.device(id))
            try gateway.push(.device(id), id: "low", priority: 1)
            try gateway.push(.device(id), id: "high", priority: 9)
            let back = try gateway.device(id)
            let (_, first) = try back.next(waitingFor: "the queued pushes")
            if case .missed = first { throw .skip("the gateway's queue dropped one of two pushes (MISSED); its queue is too small to judge order") }
            guard case .push(let push) = first else { throw .fail("a reconnecting device got \(describe(first)), expected PUSH") }
            try Expect.equal(String(decoding: push.id, as: UTF8.self), "high", "first queued push delivered")
            try Expect.equal(try gateway.nextPushID(back, "the second queued push"), "low", "second queued push delivered")
            return "priority 9 before priority 1"
        },

        ConformanceCase("gateway.collapse", clause: "4.13-5", "a newer queued push replaces an older one with the same collapse_key") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let id = ctx.unique("dev")
            try gateway.disconnect(try gateway.device(id))
            try gateway.push(.device(id), id: "old", collapseKey: "inbox")
            try gateway.push(.device(id), id: "new", collapseKey: "inbox")
            let back = try gateway.device(id)
            let (_, first) = try back.next(waitingFor: "the collapsed push")
            guard case .push(let push) = first else { throw .fail("a reconnecting device got \(describe(first)), expected PUSH") }
            try Expect.equal(String(decoding: push.id, as: UTF8.self), "new", "the push kept for collapse_key inbox")
            try back.expectSilence(ms: ctx.quietMs, "the replaced push")
            return "only the newer push was delivered"
        },

        ConformanceCase("gateway.device-form", clause: "4.14-1", "a device's PUSH carries only id, alert, priority and collapse_key") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let id = ctx.unique("dev")
            let device = try gateway.device(id)
            try gateway.push(.device(id), id: "form", ttl: 120, priority: 7, collapseKey: "c", alert: true)
            let frame = try device.nextFrame(waitingFor: "the PUSH")
            try Expect.that(frame.header.type == .push, "the device got a frame of type \(frame.header.rawType), expected PUSH")
            let fields: [(tag: FieldTag, value: [UInt8])]
            do {
                fields = try frame.body.withUnsafeBytes { body throws(WireError) in try FieldSet.listAll(in: body) }
            } catch {
                throw .fail("the device's PUSH body does not parse: \(error)")
            }
            let allowed: Set<FieldTag> = [.id, .alert, .priority, .collapseKey]
            let extra = fields.filter { !allowed.contains($0.tag) }.map(\.tag.description)
            try Expect.that(extra.isEmpty, "the device's PUSH carried fields \(extra.joined(separator: ", "))")
            func value(_ tag: FieldTag) -> [UInt8]? { fields.first { $0.tag == tag }?.value }
            try Expect.that(value(.id) == Array("form".utf8), "id not forwarded unchanged")
            try Expect.that(value(.alert) == [1], "alert 1 not forwarded")
            try Expect.that(value(.priority) == [7], "priority 7 not forwarded")
            try Expect.that(value(.collapseKey) == Array("c".utf8), "collapse_key not forwarded")
            try device.send(.deliveryAck(DeliveryAck(id: Array("form".utf8))), correlation: frame.header.correlation)
            return "fields: " + fields.map(\.tag.description).joined(separator: ", ")
        },

        ConformanceCase("gateway.redelivery", clause: "4.14-3", "pushes not acknowledged are delivered again on reconnect") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let id = ctx.unique("dev")
            let device = try gateway.device(id)
            try gateway.push(.device(id), id: "acked")
            try gateway.push(.device(id), id: "unacked")
            try Expect.equal(try gateway.nextPushID(device, acknowledge: true, "the first push"), "acked", "first push")
            try Expect.equal(try gateway.nextPushID(device, acknowledge: false, "the second push"), "unacked", "second push")
            // Give the DELIVERY_ACK a moment on the wire before the half-close follows it.
            try device.expectAlive("the DELIVERY_ACK")
            try gateway.disconnect(device)
            let back = try gateway.device(id)
            try Expect.equal(try gateway.nextPushID(back, "the redelivered push"), "unacked", "redelivered push")
            try back.expectSilence(ms: ctx.quietMs, "the acknowledged push")
            return "the unacknowledged push came again; the acknowledged one did not"
        },

        ConformanceCase("gateway.missed-expired", clause: "4.15-1", "pushes dropped at ttl_s are reported with MISSED after HELLO_OK") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let id = ctx.unique("dev")
            try gateway.disconnect(try gateway.device(id))
            let ack = try gateway.push(.device(id), id: "short-lived", ttl: 1)
            try Expect.equal(ack.queued, 1, "PUSH_ACK queued for an offline device")
            Pause.sleep(ms: 1_300)
            let back = try gateway.device(id)
            let (header, message) = try back.next(waitingFor: "MISSED")
            guard case .missed(let missed) = message else { throw .fail("a device whose queued push expired got \(describe(message)), expected MISSED") }
            try Expect.equal(missed.missedCount, 1, "missed_count")
            try Expect.equal(header.correlation, 0, "MISSED correlation [2-9]")
            try back.expectSilence(ms: ctx.quietMs, "an expired push")
            return "MISSED 1 right after HELLO_OK; the expired push not delivered"
        },

        ConformanceCase("gateway.missed-queue-full", clause: "4.15-1", "pushes dropped from a full queue are reported with MISSED") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let id = ctx.unique("dev")
            try gateway.disconnect(try gateway.device(id))
            let sent = 8
            for index in 0..<sent { try gateway.push(.device(id), id: "q\(index)") }
            let back = try gateway.device(id)
            var missed: UInt32?
            var delivered = 0
            var first = true
            // Bounded: a gateway that kept sending could not hold the case forever.
            for _ in 0..<(sent + 4) {
                guard let frame = try back.pollFrame(timeoutMs: ctx.quietMs, waitingFor: "queued pushes") else { break }
                switch try back.decode(frame, "queued pushes") {
                case .missed(let report):
                    try Expect.that(first, "MISSED came after \(delivered) pushes, not right after HELLO_OK")
                    missed = (missed ?? 0) + report.missedCount
                case .push(let push):
                    delivered += 1
                    try back.send(.deliveryAck(DeliveryAck(id: push.id)), correlation: frame.header.correlation)
                case let other:
                    throw .fail("a reconnecting device got \(describe(other))")
                }
                first = false
            }
            guard let missed else {
                if delivered == sent { throw .skip("the queue held all \(sent) pushes; MISSED is not observable with a queue this large") }
                throw .fail("\(sent - delivered) of \(sent) queued pushes vanished without MISSED")
            }
            try Expect.equal(Int(missed) + delivered, sent, "MISSED count plus pushes delivered")
            return "\(sent) queued: MISSED \(missed), then \(delivered) pushes"
        },
    ]
}
