import PushClock
import PushSecurity
import PushWire

/// SEND (revision 1.3, section 4.17): a store started to hand pushes to a gateway, the
/// gateway given to the run. A store that hands pushes to none answers SEND with
/// BAD_REQUEST (4.17), and these cases SKIP there.
enum SendCases {
    static let all: [ConformanceCase] = [
        ConformanceCase("send.push", clause: "4.17-3", "SEND_OK, then the store's PUSH of the new id reaches the recipient's device") { ctx throws(CaseStop) in
            let send = try SendFixture(ctx)
            let (deviceID, device) = try send.recipientDevice()
            let ok = try send.sendOK(SendRequest(user: send.user, payload: Array("by SEND".utf8), ttlSeconds: 600,
                                                 target: .device(deviceID), pushTTLSeconds: 300))
            let push = try send.push(of: ok.id, on: device, "the store's PUSH for the SEND")
            let fetched = try send.fixture.fetch(ok.id, token: try ctx.token(user: send.user, device: deviceID))
            guard case .fetchOK(let payload) = fetched, payload.payload == Array("by SEND".utf8) else {
                throw .fail("FETCH of the SEND's id by its device was answered \(describe(fetched))")
            }
            try Expect.that(push.alert == false && push.collapseKey == nil, "the PUSH carries alert or a collapse key the SEND did not")
            return "PUSH of id \(ok.id) on the device; FETCH by that device gives the payload"
        },

        ConformanceCase("send.status", clause: "4.12-2", "STATUS of a SEND's payload: push_state 2 with written and queued once the gateway answered; none for STORE") { ctx throws(CaseStop) in
            let send = try SendFixture(ctx)
            let (deviceID, device) = try send.recipientDevice()
            let ok = try send.sendOK(SendRequest(user: send.user, payload: [1, 2, 3], target: .device(deviceID)))
            _ = try send.push(of: ok.id, on: device, "the store's PUSH for the SEND")
            let status = try send.fixture.status(ok.id) { $0.push != .waiting }
            try Expect.that(status.push == .handed(PushAck(written: 1, queued: 0)),
                            "STATUS after the device got the PUSH: \(status.push), expected push_state 2 with written 1 queued 0")
            let stored = try send.fixture.store()
            let plain = try send.fixture.status(stored.id)
            try Expect.that(plain.push == .none, "STATUS of a STORE's payload carries \(plain.push), expected no push_state")
            return "SEND: push_state 2, 1 written, 0 queued; STORE: none"
        },

        ConformanceCase("send.commit", clause: "4.17-1", "SEND is checked as STORE: an unknown user, ttl_s 0 or an oversized payload store nothing") { ctx throws(CaseStop) in
            let send = try SendFixture(ctx)
            try Expect.error(try send.provider.request(.send(SendRequest(user: ctx.unique("nobody"), payload: [1]))), .unknownUser,
                             "SEND to an unknown user")
            try Expect.error(try send.provider.request(.send(SendRequest(user: send.user, payload: [1], ttlSeconds: 0))), .badRequest,
                             "SEND with ttl_s 0")
            let ok = try send.sendOK(SendRequest(user: send.user, payload: [9], ttlSeconds: 120))
            let now = Clocks.wallMilliseconds()
            try Expect.that(ok.expiresAt > now && ok.expiresAt <= now + 125_000, "SEND_OK expires_at \(ok.expiresAt) is not about 120 s from now")
            let status = try send.fixture.status(ok.id)
            try Expect.that(status.state == .stored, "STATUS of the SEND's payload: \(status.state)")
            return "UNKNOWN_USER and BAD_REQUEST as for STORE; SEND_OK's payload is stored"
        },

        ConformanceCase("send.target", clause: "4.17-2", "the push goes to the recipient by default; another user or an empty target is BAD_REQUEST") { ctx throws(CaseStop) in
            let send = try SendFixture(ctx)
            try Expect.error(try send.provider.request(.send(SendRequest(user: send.user, payload: [1], target: .user(ctx.unique("other"))))),
                             .badRequest, "SEND whose target is another user")
            try Expect.error(try send.provider.request(.send(SendRequest(user: send.user, payload: [1], target: .device("")))),
                             .badRequest, "SEND with an empty target")
            let (_, device) = try send.recipientDevice()
            let ok = try send.sendOK(SendRequest(user: send.user, payload: [2]))
            // Other devices of the run's user may be connected too: this one gets the id among any others.
            _ = try send.push(of: ok.id, on: device, "the store's PUSH for a SEND without a target")
            return "BAD_REQUEST for another user and an empty target; no target reached the recipient's device"
        },

        ConformanceCase("send.idempotent", clause: "4.17-5", "a SEND repeated with its key replays SEND_OK and stores nothing; other content is CONFLICT") { ctx throws(CaseStop) in
            let send = try SendFixture(ctx)
            let key = ctx.unique("key")
            let request = SendRequest(user: send.user, payload: Array("once only".utf8), idempotencyKey: key)
            let first = try send.sendOK(request)
            try Expect.that(!first.replayed, "the first SEND with a key says replayed")
            let again = try send.sendOK(request)
            try Expect.that(again.replayed && again.id == first.id && again.expiresAt == first.expiresAt,
                            "the repeat got id \(again.id) expires_at \(again.expiresAt) replayed \(again.replayed), the first \(first.id) \(first.expiresAt)")
            var other = request
            other.payload = Array("something else".utf8)
            try Expect.error(try send.provider.request(.send(other)), .conflict, "SEND with a used key and other content")
            return "replayed with the first id; CONFLICT for other content"
        },

        ConformanceCase("send.idempotent-in-flight", clause: "4.17-6", "a refused SEND leaves its key unused; a key being committed is BUSY or the first's answer") { ctx throws(CaseStop) in
            let send = try SendFixture(ctx)
            let key = ctx.unique("key")
            try Expect.error(try send.provider.request(.send(SendRequest(user: ctx.unique("nobody"), payload: [1], idempotencyKey: key))),
                             .unknownUser, "SEND with a key to an unknown user")
            let request = SendRequest(user: send.user, payload: [1], idempotencyKey: key)
            // Two at once on one connection: the second meets the first in flight (BUSY) or
            // committed (its answer), never a second payload.
            let ids = [try send.provider.send(.send(request)), try send.provider.send(.send(request))]
            let answers = try send.provider.answers(to: ids, "two SENDs with one key")
            guard case .sendOK(let first)? = answers[ids[0]], !first.replayed else {
                throw .fail("the first SEND with a key unused so far was answered \(answers[ids[0]].map(describe) ?? "nothing"), expected a fresh SEND_OK")
            }
            switch answers[ids[1]] {
            case .sendOK(let second)? where second.replayed && second.id == first.id: break
            case .error(let error)? where error.status == .busy: break
            case let answer: throw .fail("the second SEND with the key was answered \(answer.map(describe) ?? "nothing"), expected BUSY or the first's id replayed")
            }
            let later = try send.sendOK(request)
            try Expect.that(later.replayed && later.id == first.id, "after the commit the key's SEND got \(later.id), replayed \(later.replayed)")
            return "the refused SEND left the key free; the pipelined repeat was \(describe(answers[ids[1]] ?? .pong))"
        },

        ConformanceCase("send.idempotent-providers", clause: "4.17-7", "a key used on one provider connection is replayed on another") { ctx throws(CaseStop) in
            let send = try SendFixture(ctx)
            let request = SendRequest(user: send.user, payload: [7], idempotencyKey: ctx.unique("key"))
            let first = try send.sendOK(request)
            let elsewhere = try ctx.storeProvider().request(.send(request))
            guard case .sendOK(let again) = elsewhere, again.replayed, again.id == first.id else {
                throw .fail("the key's SEND on another provider connection was answered \(describe(elsewhere))")
            }
            return "the second connection got the first id, replayed"
        },

        ConformanceCase("send.audience", clause: "4.9-4", "a SEND to one device, or to a tag, is listed and readable only by the devices it was pushed to") { ctx throws(CaseStop) in
            let send = try SendFixture(ctx)
            let target = try ctx.enrolledDevice(tags: [ctx.unique("tag")])
            let targetToken = try ctx.token(user: send.user, device: target.deviceID)
            let toDevice = try send.sendOK(SendRequest(user: send.user, payload: Array("for one device".utf8), target: .device(target.deviceID)))
            let toTag = try send.sendOK(SendRequest(user: send.user, payload: Array("for a tag".utf8), target: .tag(target.tags[0])))
            // Enrolled after both SENDs, with the same tag: of neither audience.
            let later = try ctx.enrolledDevice(tags: target.tags)
            let laterToken = try ctx.token(user: send.user, device: later.deviceID)
            for (token, name) in [(send.fixture.token, "the reader device"), (laterToken, "a device enrolled afterwards with the tag")] {
                let listed = try send.fixture.syncAllOrSkip(token: token)
                try Expect.that(!listed.contains(toDevice.id) && !listed.contains(toTag.id), "SYNC of \(name) lists what was sent to another device")
                try send.fixture.fetchRefused(toDevice.id, token: token, .forbidden, "FETCH by \(name) of what was sent to another device")
                try send.fixture.fetchRefused(toTag.id, token: token, .forbidden, "FETCH by \(name) of what was sent to a tag it did not have")
            }
            let listed = try send.fixture.syncAllOrSkip(token: targetToken)
            try Expect.that(listed.contains(toDevice.id) && listed.contains(toTag.id), "SYNC of the target device does not list what was sent to it")
            guard case .fetchOK = try send.fixture.fetch(toDevice.id, token: targetToken) else { throw .fail("FETCH by the target device failed") }
            return "listed and readable by the device and the tag's device only; FORBIDDEN for the others"
        },
    ]

}

/// What the SEND cases keep doing: the store's provider, devices of the run's user at the
/// gateway, SEND_OK required.
struct SendFixture {
    let ctx: CaseContext
    let fixture: StoreFixture
    var provider: WireSession { fixture.provider }
    var user: String { fixture.user }

    init(_ ctx: CaseContext) throws(CaseStop) {
        self.ctx = ctx
        fixture = try StoreFixture(ctx)
        _ = try ctx.gatewayEndpoint()
        // A store that hands pushes to no gateway refuses every SEND alike.
        let probe = try fixture.provider.request(.send(SendRequest(user: ctx.unique("nobody"), payload: [0], target: .user(""))))
        if case .error(let error) = probe, error.status == .badRequest, error.message?.contains("gateway") == true {
            throw .skip("the store hands pushes to no gateway: \(error.message ?? "")")
        }
    }

    func sendOK(_ request: SendRequest) throws(CaseStop) -> SendOK {
        let answer = try provider.request(.send(request))
        guard case .sendOK(let ok) = answer else { throw .fail("SEND was answered \(describe(answer))") }
        ctx.noteStored(ok.id)
        return ok
    }

    /// A device of the run's user connected to the gateway: enrolled in the store's registry
    /// when the gateway follows it (the HELLO is repeated until the gateway has heard of
    /// the enrolment), else under a fresh registration.
    func recipientDevice() throws(CaseStop) -> (String, WireSession) {
        guard try ctx.gatewayFollowsRegistry() else {
            // Enrolled at the store too, so that it can read what is sent to it alone ([4.9-4]).
            let deviceID = try ctx.enrolledDevice().deviceID
            return (deviceID, try ctx.gatewayDevice(deviceID, user: user))
        }
        let record = try ctx.enrolledDevice()
        let signer = CredentialSigner(serverKey: try ctx.keys().serverKey, purpose: CredentialSigner.registrationPurpose)
        let credential = Registration(deviceID: record.deviceID, user: record.user, tags: record.tags, issuedAt: record.issuedAt,
                                      expiresAt: record.expiresAt).signed(by: signer)
        let deadline = Clocks.monotonicMilliseconds() + Int64(ctx.timeoutMs)
        while true {
            let session = try ctx.connectGateway()
            let answer = try session.hello(CaseContext.hello(.device, credential: credential))
            if case .helloOK = answer { return (record.deviceID, session) }
            guard Clocks.monotonicMilliseconds() < deadline else {
                throw .fail("the gateway refused the HELLO of a device enrolled \(ctx.timeoutMs) ms ago: \(describe(answer))")
            }
            Pause.sleep(ms: 100)
        }
    }

    /// The next PUSH on `device`, acknowledged.
    func nextPush(_ device: WireSession, _ what: String) throws(CaseStop) -> Push {
        let (header, message) = try device.next(waitingFor: what)
        guard case .push(let push) = message else { throw .fail("\(what): the device got \(describe(message)), expected PUSH") }
        try device.send(.deliveryAck(DeliveryAck(id: push.id)), correlation: header.correlation)
        return push
    }

    /// The PUSH of `id` on `device`, any other acknowledged on the way: cases run side by
    /// side, and a SEND to the run's user reaches every device of that user.
    func push(of id: PayloadID, on device: WireSession, _ what: String) throws(CaseStop) -> Push {
        while true {
            let push = try nextPush(device, what)
            if push.id == id.bytes { return push }
        }
    }
}
