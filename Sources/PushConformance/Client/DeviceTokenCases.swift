import PushWire

/// The generic notification and the token (4.14-4, 4.14-10, 4.14-13), and FETCH answers
/// the device must not take as content (4.8-4) or as a refusal (5.8-4).
enum DeviceTokenCases {
    static let all: [ClientCase] = [noToken, expired, badToken, genericOnce, relogin, notSealedForDevice, unopenable, gone, fetchOKBoth,
                                    busyFetch, rateLimitedFetch]

    static let noToken = ClientCase("dev.generic.no-token", clause: "4.14-4",
                                    "without a token the device shows the generic notification and still acknowledges the PUSH") { h throws(CaseStop) in
        try h.startAndConnect()
        try h.settle()
        let (id, _) = h.commitPayload()
        guard let correlation = h.gateway.push(id) else { throw .fail("the device is not connected to the gateway") }
        try h.wait("the device without a token did not show the generic notification for \(id.hex)") { !h.shown(id).isEmpty }
        guard h.shown(id)[0].isGeneric else { throw .fail("without a token the device showed \(h.shown(id)[0].content.summary)") }
        try h.wait("no DELIVERY_ACK for the PUSH (correlation \(correlation))") { h.deliveryAcks.contains { $0.correlation == correlation } }
        return "generic shown, PUSH acknowledged"
    }

    /// The store refuses the token with `status`: the generic notification once, no ACK.
    static func refusedToken(_ status: Status) -> ClientCase.Body {
        { h throws(CaseStop) in
            try h.startLoggedIn()
            let (id, _) = h.commitPayload()
            h.store.intercept = { request in
                switch request.message {
                case .fetch, .sync, .ack: .error(status)
                default: .faithful
                }
            }
            let shown = try h.pushAndWaitShown(id)
            guard shown.isGeneric else { throw .fail("after \(status) the device showed \(shown.content.summary)") }
            try h.pause(1_000)
            guard h.shown(id).count == 1 else { throw .fail("the device showed \(id.hex) \(h.shown(id).count) times") }
            guard h.acks(id).isEmpty else { throw .fail("the device ACKed \(id.hex) after its FETCH was refused \(status)") }
            return "generic once after \(status), no ACK"
        }
    }

    static let expired = ClientCase("dev.generic.expired", clause: "4.14-4",
                                    "a FETCH refused TOKEN_EXPIRED shows the generic notification, once, with no ACK",
                                    body: refusedToken(.tokenExpired))

    static let badToken = ClientCase("dev.generic.bad-token", clause: "4.14-4",
                                     "a FETCH refused BAD_TOKEN shows the generic notification, once, with no ACK",
                                     body: refusedToken(.badToken))

    static let genericOnce = ClientCase("dev.generic.once", clause: "4.14-11",
                                        "the generic notification for an id is shown once however often it is pushed") { h throws(CaseStop) in
        try h.startAndConnect()
        try h.settle()
        let (id, _) = h.commitPayload()
        try h.pushAndWaitShown(id)
        h.gateway.push(id)
        h.gateway.push(id)
        try h.pause(800)
        guard h.shown(id).count == 1 else { throw .fail("the generic notification for \(id.hex) was shown \(h.shown(id).count) times") }
        return "three PUSHes, one generic notification"
    }

    static let relogin = ClientCase("dev.relogin.fetch", clause: "4.14-13",
                                    "after a login the device fetches and shows what it showed as generic, without a new PUSH") { h throws(CaseStop) in
        try h.startAndConnect()
        try h.settle()
        let (id, content) = h.commitPayload()
        try h.pushAndWaitShown(id)
        // The store will list nothing: only the device's own memory of the id can bring it back.
        h.store.intercept = { request in
            if case .sync = request.message { return .reply(.syncOK(SyncOK(ids: [], cursor: HarnessStore.cursorBase, hasMore: false))) }
            return .faithful
        }
        try h.giveToken()
        try h.wait("after the token appeared, the device did not show \(id.hex)'s content", timeoutMs: 4_000) {
            h.shown(id).contains { $0.content == .payload(content) }
        }
        return "generic, then the content after the login"
    }

    static let notSealedForDevice = ClientCase("dev.sealed.not-for-device", clause: "4.14-10",
                                               "a FETCH answered NOT_SEALED_FOR_DEVICE shows the generic notification once and is not acknowledged") { h throws(CaseStop) in
        try h.startLoggedIn()
        let (id, _) = h.commitPayload()
        h.store.intercept = { request in
            if case .fetch = request.message { return .error(.notSealedForDevice) }
            return .faithful
        }
        let shown = try h.pushAndWaitShown(id)
        guard shown.isGeneric else { throw .fail("the device showed \(shown.content.summary)") }
        try h.pause(800)
        guard h.shown(id).count == 1 else { throw .fail("shown \(h.shown(id).count) times") }
        guard h.acks(id).isEmpty else { throw .fail("the device ACKed a payload it could not read") }
        return "generic once, no ACK"
    }

    static let unopenable = ClientCase("dev.sealed.unopenable", clause: "7.6-5",
                                       "a sealed payload that does not open shows the generic notification once and is not acknowledged") { h throws(CaseStop) in
        try h.startLoggedIn()
        let id = h.store.commit((0..<96).map { _ in UInt8.random(in: 0...255) }, sealed: true)
        let shown = try h.pushAndWaitShown(id)
        guard shown.isGeneric else { throw .fail("a sealed view that cannot open was shown as \(shown.content.summary)") }
        try h.pause(800)
        guard h.shown(id).count == 1 else { throw .fail("shown \(h.shown(id).count) times") }
        guard h.acks(id).isEmpty else { throw .fail("the device ACKed a sealed payload it could not open") }
        return "generic once, no ACK"
    }

    static let gone = ClientCase("dev.push.gone", clause: "4.14-12",
                                 "a PUSH for a payload the store answers GONE is neither shown with content nor acknowledged") { h throws(CaseStop) in
        try h.startLoggedIn()
        let (id, _) = h.commitPayload()
        h.store.intercept = { request in
            switch request.message {
            case .fetch(let fetch) where fetch.id == id: .error(.gone)
            case .ack(let ack) where ack.id == id: .error(.gone)
            default: .faithful
            }
        }
        h.gateway.push(id)
        try h.wait("the device did not FETCH \(id.hex)") { !h.fetches(id).isEmpty }
        try h.pause(800)
        if let shown = h.shown(id).first(where: { !$0.isGeneric }) { throw .fail("a payload answered GONE was shown with \(shown.content.summary)") }
        guard h.acks(id).isEmpty else { throw .fail("the device ACKed \(id.hex), whose FETCH was answered GONE") }
        return "not shown, not acknowledged"
    }

    static let fetchOKBoth = ClientCase("dev.fetch-ok.both", clause: "4.8-4",
                                        "a FETCH_OK with both `payload` and `sealed_payload` is refused: nothing of it is shown") { h throws(CaseStop) in
        try h.startLoggedIn()
        let (id, content) = h.commitPayload()
        let body = RawFrame.field(.expiresAt, RawFrame.bigEndian(UInt64.max / 2)) + RawFrame.field(.id, id.bytes)
            + RawFrame.field(.payload, content) + RawFrame.field(.createdAt, RawFrame.bigEndian(UInt64(1)))
            + RawFrame.field(.sealedPayload, [1, 2, 3])
        h.store.intercept = { request in
            if case .fetch = request.message { return .rawReply(RawFrame.frame(.fetchOK, correlation: request.correlation, body: body)) }
            return .faithful
        }
        h.gateway.push(id)
        try h.wait("the device did not FETCH \(id.hex)") { !h.fetches(id).isEmpty }
        try h.pause(800)
        if let shown = h.shown(id).first(where: { !$0.isGeneric }) {
            throw .fail("the device showed \(shown.content.summary) from a FETCH_OK that carries both payload fields")
        }
        guard h.acks(id).isEmpty else { throw .fail("the device ACKed \(id.hex) after a malformed FETCH_OK") }
        return "malformed FETCH_OK not shown, not acknowledged"
    }

    /// The store answers the first FETCH with `status`: the device asks again, not at once,
    /// and shows the content, never the generic notification.
    static func transientRefusal(_ status: Status) -> ClientCase.Body {
        { h throws(CaseStop) in
            try h.startLoggedIn()
            let (id, content) = h.commitPayload()
            var refused = false
            h.store.intercept = { request in
                guard case .fetch = request.message, !refused else { return .faithful }
                refused = true
                return .error(status)
            }
            h.gateway.push(id)
            try h.wait("after \(status) the device did not FETCH \(id.hex) again") { h.fetches(id).count >= 2 }
            let gap = h.fetches(id)[1].atMs - h.fetches(id)[0].atMs
            try h.wait("the device did not show \(id.hex) after the retried FETCH") { !h.shown(id).isEmpty }
            guard h.shown(id).allSatisfy({ $0.content == .payload(content) }) else {
                throw .fail("after \(status) the device showed \(h.shown(id)[0].content.summary)")
            }
            // The answer travels to the device and back on loopback: a retry at once takes a millisecond or two.
            guard gap >= 90 else { throw .fail("the FETCH was sent again \(gap) ms after the first (at least 100 ms)") }
            return "asked again after \(gap) ms, then shown"
        }
    }

    static let busyFetch = ClientCase("dev.busy.fetch", clause: "5.8-4",
                                      "a FETCH answered BUSY is asked again after a wait, and the content shown",
                                      body: transientRefusal(.busy))

    static let rateLimitedFetch = ClientCase("dev.rate-limited.fetch", clause: "5.8-4",
                                             "a FETCH answered RATE_LIMITED is asked again after a wait, and the content shown",
                                             body: transientRefusal(.rateLimited))
}
