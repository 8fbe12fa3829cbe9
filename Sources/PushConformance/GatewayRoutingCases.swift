import PushWire

/// Routing by device, user and tag, and PUSH_ACK counts (sections 4.13, 7.4-2).
extension GatewayCases {
    static let routing: [ConformanceCase] = [
        ConformanceCase("gateway.push-needs-target", clause: "4.13-2", "a provider's PUSH without target is BAD_REQUEST") { ctx throws(CaseStop) in
            let provider = try ctx.gatewayProvider()
            try Expect.refused(provider, .push(Push(target: nil, id: [1, 2, 3])), .badRequest, "PUSH without target")
            return "BAD_REQUEST"
        },

        ConformanceCase("gateway.route-device", clause: "4.13-3", "target kind 1 reaches the device with that id only") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let aID = ctx.unique("dev"), bID = ctx.unique("dev")
            let a = try gateway.device(aID), b = try gateway.device(bID)
            let ack = try gateway.push(.device(aID), id: "to-a")
            try Expect.equal(try gateway.nextPushID(a, "the PUSH for device A"), "to-a", "id delivered to A")
            try b.expectSilence(ms: ctx.quietMs, "a PUSH for another device")
            try Expect.that(ack.written == 1 && ack.queued == 0, "PUSH_ACK written \(ack.written) queued \(ack.queued), expected 1 and 0")
            return "device A got it, device B did not; PUSH_ACK 1/0"
        },

        ConformanceCase("gateway.route-user", clause: "4.13-3", "target kind 2 reaches every device of the user") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let phone = try gateway.device(ctx.unique("dev")), tablet = try gateway.device(ctx.unique("dev"))
            let stranger = try gateway.device(ctx.unique("dev"), user: ctx.unique("user"))
            let ack = try gateway.push(.user(gateway.user), id: "to-user")
            try Expect.equal(try gateway.nextPushID(phone, "the user's PUSH on the first device"), "to-user", "id on the first device")
            try Expect.equal(try gateway.nextPushID(tablet, "the user's PUSH on the second device"), "to-user", "id on the second device")
            try stranger.expectSilence(ms: ctx.quietMs, "another user's PUSH")
            try Expect.that(ack.written == 2 && ack.queued == 0, "PUSH_ACK written \(ack.written) queued \(ack.queued), expected 2 and 0")
            return "both of the user's devices, not the other user's; PUSH_ACK 2/0"
        },

        ConformanceCase("gateway.route-tag", clause: "4.13-3", "target kind 3 reaches every device registered with the tag") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let tag = ctx.unique("tag"), otherTag = ctx.unique("tag")
            let tagged = try gateway.device(ctx.unique("dev"), tags: [tag])
            let both = try gateway.device(ctx.unique("dev"), user: ctx.unique("user"), tags: [otherTag, tag])
            let untagged = try gateway.device(ctx.unique("dev"), tags: [otherTag])
            let ack = try gateway.push(.tag(tag), id: "to-tag")
            try Expect.equal(try gateway.nextPushID(tagged, "the tag's PUSH"), "to-tag", "id on the tagged device")
            try Expect.equal(try gateway.nextPushID(both, "the tag's PUSH on a device with two tags"), "to-tag", "id on the device with two tags")
            try untagged.expectSilence(ms: ctx.quietMs, "a PUSH for a tag it does not have")
            try Expect.that(ack.written == 2 && ack.queued == 0, "PUSH_ACK written \(ack.written) queued \(ack.queued), expected 2 and 0")
            return "both tagged devices (across users), not the untagged one; PUSH_ACK 2/0"
        },

        ConformanceCase("gateway.tags", clause: "7.4-2", "a registration's tags are separate names") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let first = ctx.unique("tag"), second = ctx.unique("tag")
            let device = try gateway.device(ctx.unique("dev"), tags: [first, second])
            for tag in [first, second] {
                let ack = try gateway.push(.tag(tag), id: "tag-\(tag)")
                try Expect.equal(try gateway.nextPushID(device, "the PUSH for tag \(tag)"), "tag-\(tag)", "id for tag \(tag)")
                try Expect.equal(ack.written, 1, "PUSH_ACK written for tag \(tag)")
            }
            // A target holding the separator is no name at all: 0a is a control character ([3.3-8]).
            let joined = Push(target: .tag(first + "\n" + second), id: Array("joined".utf8), ttlSeconds: 60)
            let answer = try gateway.provider.request(.push(joined))
            guard case .error(let error) = answer, error.status == .badRequest else {
                throw .fail("a target of both tags joined by 0a was answered \(describe(answer)), expected ERROR BAD_REQUEST (3.3-8)")
            }
            return "each of two tags routes; the two joined by 0a are BAD_REQUEST"
        },

        ConformanceCase("gateway.push-ack-counts", clause: "4.13-4", "PUSH_ACK counts devices written and queued; no match is 0 and 0") { ctx throws(CaseStop) in
            let gateway = try GatewayFixture(ctx)
            let none = try gateway.push(.device(ctx.unique("nobody")), id: "none")
            try Expect.that(none.written == 0 && none.queued == 0, "a PUSH matching no device got PUSH_ACK \(none.written)/\(none.queued)")
            let onlineID = ctx.unique("dev"), offlineID = ctx.unique("dev")
            let online = try gateway.device(onlineID)
            try gateway.disconnect(try gateway.device(offlineID))
            let ack = try gateway.push(.user(gateway.user), id: "counted")
            _ = try gateway.nextPush(online, "the PUSH on the connected device")
            try Expect.that(ack.written == 1 && ack.queued == 1, "one connected and one offline device got PUSH_ACK written \(ack.written) queued \(ack.queued)")
            return "no match → 0/0; one online and one offline device → 1/1"
        },
    ]
}
