import PushWire
import PushSession

/// PUSH's `user` and `once` (revision 1.3: 4.13-11, 4.13-12). A gateway of revision 1.2
/// refuses such a PUSH with BAD_REQUEST (3.4-6), and these cases fail there.
extension GatewayCases {
    static let userAndOnce: [ConformanceCase] = [
        ConformanceCase("gateway.push-user", clause: "4.13-11", "a PUSH with user reaches, of its target's devices, only that user's") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let tag = ctx.unique("tag"), otherUser = ctx.unique("user")
            let mineID = ctx.unique("dev"), theirsID = ctx.unique("dev")
            let mine = try gateway.device(mineID, tags: [tag])
            let theirs = try gateway.device(theirsID, user: otherUser, tags: [tag])
            let byTag = try gateway.push(.tag(tag), id: "tag-for-user", user: gateway.user)
            try Expect.equal(try gateway.nextPushID(mine, "the tag's PUSH for its user"), "tag-for-user", "id on the user's device")
            try Expect.that(byTag.written == 1 && byTag.queued == 0,
                            "a tag of two users' devices, with user, got PUSH_ACK \(byTag.written)/\(byTag.queued), expected 1/0")
            let byDevice = try gateway.push(.device(theirsID), id: "device-of-another", user: gateway.user)
            try Expect.that(byDevice.written == 0 && byDevice.queued == 0,
                            "another user's device, with user, got PUSH_ACK \(byDevice.written)/\(byDevice.queued), expected 0/0")
            let byUser = try gateway.push(.user(otherUser), id: "user-of-another", user: gateway.user)
            try Expect.that(byUser.written == 0 && byUser.queued == 0,
                            "another user's target, with user, got PUSH_ACK \(byUser.written)/\(byUser.queued), expected 0/0")
            try theirs.expectSilence(ms: ctx.quietMs, "PUSHes restricted to another user")
            try mine.expectSilence(ms: ctx.quietMs, "PUSHes for another user's device and target")
            return "tag: the user's device only (1/0); another user's device or user target: 0/0, nothing delivered"
        },

        ConformanceCase("gateway.push-once", clause: "4.13-12", "a repeated PUSH with once 1 is answered with the first counts and not written again; once 0 is new") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let deviceID = ctx.unique("dev"), id = ctx.unique("once")
            let device = try gateway.device(deviceID)
            let first = try gateway.push(.device(deviceID), id: id, once: true)
            try Expect.that(first.written == 1 && first.queued == 0, "the first PUSH with once 1 got PUSH_ACK \(first.written)/\(first.queued), expected 1/0")
            try Expect.equal(try gateway.nextPushID(device, "the first PUSH with once 1"), id, "id delivered")
            let again = try gateway.push(.device(deviceID), id: id, once: true)
            let elsewhere = try gateway.push(.device(deviceID), id: id, once: true, via: try ctx.gatewayProvider())
            for (ack, how) in [(again, "on the same connection"), (elsewhere, "on another provider connection")] {
                try Expect.that(ack.written == first.written && ack.queued == first.queued,
                                "the repeat \(how) got PUSH_ACK \(ack.written)/\(ack.queued), the first \(first.written)/\(first.queued)")
            }
            try device.expectSilence(ms: ctx.quietMs, "repeats of a PUSH with once 1")
            let plain = try gateway.push(.device(deviceID), id: id)
            try Expect.that(plain.written == 1, "a PUSH with once 0 and the same id got PUSH_ACK \(plain.written)/\(plain.queued), expected 1/0")
            try Expect.equal(try gateway.nextPushID(device, "the PUSH with once 0"), id, "id delivered again")
            return "repeats (two connections): the first PUSH_ACK, nothing written; once 0: delivered again"
        },

        ConformanceCase("gateway.push-once-queued", clause: "4.13-12", "a repeated PUSH with once 1 for an offline device is not queued again") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let deviceID = ctx.unique("dev"), id = ctx.unique("once")
            try gateway.disconnect(try gateway.device(deviceID))
            let first = try gateway.push(.device(deviceID), id: id, once: true)
            try Expect.that(first.written == 0 && first.queued == 1, "an offline device got PUSH_ACK \(first.written)/\(first.queued), expected 0/1")
            let again = try gateway.push(.device(deviceID), id: id, once: true)
            try Expect.that(again.written == 0 && again.queued == 1, "the repeat got PUSH_ACK \(again.written)/\(again.queued), expected 0/1")
            let back = try gateway.device(deviceID)
            try Expect.equal(try gateway.nextPushID(back, "the queued PUSH"), id, "id delivered on reconnect")
            try back.expectSilence(ms: ctx.quietMs, "a second copy of a PUSH with once 1")
            return "queued 0/1 twice, delivered once"
        },
    ]
}
