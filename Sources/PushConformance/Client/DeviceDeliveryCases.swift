import PushWire

/// A push reaches the device: DELIVERY_ACK, FETCH, showing, ACK (4.14, 4.10).
enum DeviceDeliveryCases {
    static let all: [ClientCase] = [deliveryAck, fetchAndShow, repeatedPush, ackSent, ackAfterShow, ignoredFields, unknownField,
                                    pushUnlistedField]

    static let deliveryAck = ClientCase("dev.push.delivery-ack", clause: "4.14-2",
                                        "each PUSH is answered DELIVERY_ACK with its correlation id and id") { h throws(CaseStop) in
        try h.startLoggedIn()
        let (id, _) = h.commitPayload()
        guard let correlation = h.gateway.push(id) else { throw .fail("the device is not connected to the gateway") }
        try h.wait("no DELIVERY_ACK with correlation id \(correlation) came back") {
            h.deliveryAcks.contains { $0.correlation == correlation }
        }
        guard let ack = h.deliveryAcks.first(where: { $0.correlation == correlation }), ack.id == id.bytes else {
            throw .fail("the DELIVERY_ACK does not carry the pushed id")
        }
        return "DELIVERY_ACK \(correlation) carries \(id.hex)"
    }

    static let fetchAndShow = ClientCase("dev.push.fetch-show", clause: "4.14-4",
                                         "on a PUSH the device FETCHes the payload with its token and shows its content") { h throws(CaseStop) in
        try h.startLoggedIn()
        let (id, content) = h.commitPayload()
        let shown = try h.pushAndWaitShown(id)
        guard let fetch = h.fetches(id).first, case .fetch(let request)? = fetch.message else {
            throw .fail("the device showed \(id.hex) without FETCHing it")
        }
        guard request.token == h.token else { throw .fail("the FETCH did not carry the token of \(h.stateDirectory)/fetch-token") }
        guard shown.content == .payload(content) else {
            throw .fail("the device showed \(shown.content.summary), not the payload's content \(content.hexString)")
        }
        try h.requireReadableOutput()
        return "fetched with the token and shown: \(content.count) bytes"
    }

    static let repeatedPush = ClientCase("dev.push.repeat", clause: "4.14-3",
                                         "a PUSH of an id already shown is the same notification: acknowledged, not shown again") { h throws(CaseStop) in
        try h.startLoggedIn()
        let (id, _) = h.commitPayload()
        try h.pushAndWaitShown(id)
        guard let again = h.gateway.push(id) else { throw .fail("the device left the gateway") }
        try h.wait("the repeated PUSH (correlation \(again)) was not answered DELIVERY_ACK") {
            h.deliveryAcks.contains { $0.correlation == again }
        }
        try h.pause(500)
        guard h.shown(id).count == 1 else { throw .fail("the device showed \(id.hex) \(h.shown(id).count) times") }
        return "repeated PUSH acknowledged, shown once"
    }

    static let ackSent = ClientCase("dev.ack.sent", clause: "4.14-12",
                                    "the device ACKs a payload it showed, so the store stops listing it") { h throws(CaseStop) in
        try h.startLoggedIn()
        let (id, _) = h.commitPayload()
        try h.pushAndWaitShown(id)
        try h.wait("no ACK of \(id.hex) reached the store after it was shown") { !h.acks(id).isEmpty }
        guard case .ack(let ack)? = h.acks(id)[0].message, ack.token == h.token else {
            throw .fail("the ACK did not carry the device's token")
        }
        return "ACK with the token"
    }

    static let ackAfterShow = ClientCase("dev.ack.after-show", clause: "4.14-12",
                                         "the device ACKs only after FETCH_OK and after showing the content") { h throws(CaseStop) in
        try h.startLoggedIn()
        let (id, _) = h.commitPayload()
        var shownWhenAcked: Bool?
        // The FETCH_OK is held back, so an ACK sent on the PUSH alone shows; when the ACK
        // arrives the device's stdout is read at once: a device that printed the line first
        // has it in the file by then.
        h.store.intercept = { [unowned h] request in
            switch request.message {
            case .fetch: return .later(ms: 400, .faithful)
            case .ack(let ack) where ack.id == id:
                h.readOutput()
                if shownWhenAcked == nil { shownWhenAcked = !h.shown(id).isEmpty }
                return .faithful
            default: return .faithful
            }
        }
        try h.pushAndWaitShown(id)
        try h.wait("no ACK of \(id.hex) reached the store") { !h.acks(id).isEmpty }
        let ackAt = h.acks(id)[0].atMs
        guard let fetchAt = h.fetches(id).first?.atMs else { throw .fail("the device ACKed \(id.hex) without FETCHing it") }
        guard ackAt >= fetchAt + 350 else {
            throw .fail("the ACK came \(ackAt - fetchAt) ms after the FETCH, before its reply (held 400 ms)")
        }
        guard shownWhenAcked == true else { throw .fail("the ACK came before the device printed its SHOWN line") }
        return "ACK \(ackAt - fetchAt) ms after the FETCH (reply held 400 ms), after the SHOWN line"
    }

    static let ignoredFields = ClientCase("dev.push.ignore-fields", clause: "4.14-1",
                                          "a PUSH with target_kind, target, ttl_s, user and once is handled like any PUSH") { h throws(CaseStop) in
        try h.startLoggedIn()
        let (id, content) = h.commitPayload()
        let correlation = h.gateway.correlation()
        let push = Push(target: .user(h.user), id: id.bytes, ttlSeconds: 60, user: h.user, once: true)
        h.gateway.send(.push(push), correlation: correlation)
        try h.wait("the device did not show \(id.hex) pushed with provider-side fields") { !h.shown(id).isEmpty }
        guard h.shown(id)[0].content == .payload(content) else { throw .fail("shown as \(h.shown(id)[0].content.summary)") }
        return "shown"
    }

    static let unknownField = ClientCase("dev.field.unknown", clause: "3.4-2",
                                         "a FETCH_OK with a field of an unknown tag is read like any FETCH_OK") { h throws(CaseStop) in
        try h.startLoggedIn()
        let (id, content) = h.commitPayload()
        let body = RawFrame.field(.expiresAt, RawFrame.bigEndian(UInt64.max / 2)) + RawFrame.field(.id, id.bytes)
            + RawFrame.field(.payload, content) + RawFrame.field(.createdAt, RawFrame.bigEndian(UInt64(1)))
            + RawFrame.field(0x7E, Array("later revision".utf8))
        h.store.intercept = { request in
            if case .fetch = request.message { return .rawReply(RawFrame.frame(.fetchOK, correlation: request.correlation, body: body)) }
            return .faithful
        }
        let shown = try h.pushAndWaitShown(id)
        guard shown.content == .payload(content) else { throw .fail("shown as \(shown.content.summary)") }
        return "unknown tag skipped"
    }

    static let pushUnlistedField = ClientCase("dev.push.unlisted-field", clause: "3.4-6",
                                              "a PUSH with a field outside PUSH's table is refused BAD_REQUEST and not acted on") { h throws(CaseStop) in
        try h.startLoggedIn()
        let (id, _) = h.commitPayload()
        let correlation = h.gateway.correlation()
        let body = RawFrame.field(.id, id.bytes) + RawFrame.field(0x7E, Array("rides along".utf8))
        h.gateway.sendRaw(RawFrame.frame(.push, correlation: correlation, body: body))
        try h.wait("no ERROR with the PUSH's correlation id came back") {
            h.log.messages(.error, to: .gateway).contains { $0.header.correlation == correlation }
        }
        guard let error = h.log.messages(.error, to: .gateway).first(where: { $0.header.correlation == correlation }),
              error.header.status == .badRequest else { throw .fail("the ERROR does not carry BAD_REQUEST") }
        try h.pause(500)
        guard h.shown(id).isEmpty, h.fetches(id).isEmpty else { throw .fail("the device acted on the refused PUSH") }
        guard !h.deliveryAcks.contains(where: { $0.correlation == correlation }) else { throw .fail("the device acknowledged the refused PUSH") }
        return "ERROR BAD_REQUEST, nothing fetched or shown"
    }
}
