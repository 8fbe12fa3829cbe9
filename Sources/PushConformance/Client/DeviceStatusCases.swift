import PushClock
import PushWire

/// Statuses and endings: what a device does with ERROR and GOAWAY in their odd forms
/// (4.5, 5.5-2, 5.6-4, 6-4, 6-6), a silent gateway (5.4-2), a version it does not speak
/// (2-3) and a token file it cannot read (7.5-4).
enum DeviceStatusCases {
    static let all: [ClientCase] = [version, silentGateway, drain, goawayCloses, errorWithOK, goawayWithOK, statusOnly,
                                    errorsOnlyAsRefusals, malformedToken]

    static let version = ClientCase("dev.frame.version", clause: "2-3",
                                    "a frame whose version byte is not 1 ends the connection",
                                    body: DeviceRecoveryCases.fatal(RawFrame.header(type: MessageType.push.rawValue, correlation: 5, length: 0, version: 2),
                                                                    "a frame of version 2"))

    static let silentGateway = ClientCase("dev.keepalive.silent", clause: "5.4-2",
                                          "a gateway silent for 1.5 x keepalive_ms (1000) is closed",
                                          limits: { $0.gateway.keepaliveMs = 1_000 }) { h throws(CaseStop) in
        try h.startLoggedIn()
        guard let device = h.gateway.device else { throw .fail("the device is not connected to the gateway") }
        // Nothing answered, not even PING: the device hears nothing at all from here on.
        h.gatewayServer.mute(device)
        let mutedAt = Clocks.monotonicMilliseconds()
        // What the device last heard: the harness's last frame to it, or the PONG that
        // answered its last PING at once.
        let lastHeard = h.log.events.filter { $0.service == .gateway && $0.connection == h.gatewayConnectionNumber && $0.atMs <= mutedAt }.last?.atMs ?? mutedAt
        try h.wait("the device kept a silent connection open", timeoutMs: 3_500) { h.log.closedAt(.gateway, connection: h.gatewayConnectionNumber) != nil }
        let after = (h.log.closedAt(.gateway, connection: h.gatewayConnectionNumber) ?? mutedAt) - lastHeard
        // The harness reads the close on its next turn, a few milliseconds late at most.
        guard after >= 1_450 else { throw .fail("the device closed the connection \(after) ms after it last heard anything, before 1.5 x keepalive_ms") }
        return "closed \(after) ms after it last heard anything"
    }

    static let drain = ClientCase("dev.goaway.drain", clause: "5.5-2",
                                  "after GOAWAY SHUTTING_DOWN the device still takes the replies up to last_correlation") { h throws(CaseStop) in
        try h.startLoggedIn()
        let (id, content) = h.commitPayload()
        var drained = false
        h.store.intercept = { request in
            guard case .fetch = request.message, !drained else { return .faithful }
            drained = true
            return .goaway(.shuttingDown, lastCorrelation: request.correlation, closeAfterMs: 600)
        }
        // The reply the GOAWAY promised, 300 ms after it.
        h.gateway.push(id)
        try h.wait("the device did not FETCH \(id.hex)") { drained }
        guard let peer = h.store.peers.last, let fetch = h.fetches(id).first else { throw .fail("the store connection is gone") }
        let reply = h.store.faithfulReply(fetch.message ?? .ping)
        try h.pause(300)
        h.storeServer.respond(reply, correlation: fetch.header.correlation, to: peer)
        try h.wait("the device did not show \(id.hex) from the reply sent after GOAWAY") { !h.shown(id).isEmpty }
        guard h.shown(id)[0].content == .payload(content), h.fetches(id).count == 1 || h.shown(id).count == 1 else {
            throw .fail("shown as \(h.shown(id)[0].content.summary)")
        }
        return h.fetches(id).count == 1 ? "the reply after GOAWAY was used" : "shown once (FETCH asked again as well)"
    }

    static let goawayCloses = ClientCase("dev.goaway.close", clause: "5.6-4",
                                         "after a GOAWAY other than SHUTTING_DOWN the device closes the connection") { h throws(CaseStop) in
        try h.startLoggedIn()
        h.gateway.sendRaw(RawFrame.frame(.goaway, correlation: 0, status: .timeout,
                                         body: RawFrame.field(.lastCorrelation, RawFrame.bigEndian(UInt32(0)))))
        try h.wait("the device kept the connection open after GOAWAY TIMEOUT") { h.log.closedAt(.gateway, connection: h.gatewayConnectionNumber) != nil }
        return "closed"
    }

    static let errorWithOK = ClientCase("dev.error.ok-status", clause: "6-6",
                                        "an ERROR whose status is OK fails its request (as INTERNAL) and the connection stays") { h throws(CaseStop) in
        try h.startLoggedIn()
        let (id, content) = h.commitPayload()
        var answered = false
        h.store.intercept = { request in
            guard case .fetch = request.message, !answered else { return .faithful }
            answered = true
            return .rawReply(RawFrame.frame(.error, correlation: request.correlation, status: .ok))
        }
        h.gateway.push(id)
        try h.wait("the device did not FETCH \(id.hex)") { answered }
        try h.pause(800)
        if let shown = h.shown(id).first, shown.content != .payload(content) {
            throw .fail("after an ERROR with status OK the device showed \(shown.content.summary)")
        }
        guard h.log.closedAt(.store, connection: h.storeConnectionNumber) == nil else { throw .fail("the device closed the store connection over an ERROR with status OK") }
        return "request failed, connection kept"
    }

    static let goawayWithOK = ClientCase("dev.goaway.ok-status", clause: "6-4",
                                         "a GOAWAY whose status is OK still ends the connection") { h throws(CaseStop) in
        try h.startLoggedIn()
        h.gateway.sendRaw(RawFrame.frame(.goaway, correlation: 0, status: .ok,
                                         body: RawFrame.field(.lastCorrelation, RawFrame.bigEndian(UInt32(0)))))
        try h.wait("the device kept the connection open after a GOAWAY with status OK") {
            h.log.closedAt(.gateway, connection: h.gatewayConnectionNumber) != nil
        }
        return "closed"
    }

    static let statusOnly = ClientCase("dev.error.status-only", clause: "4.5-1",
                                       "the device acts on an ERROR's status, never its text") { h throws(CaseStop) in
        try h.startLoggedIn()
        let (id, _) = h.commitPayload()
        h.store.intercept = { request in
            guard case .fetch = request.message else { return .faithful }
            return .reply(.error(ErrorReply(status: .notFound, message: "TOKEN_EXPIRED: log in again")))
        }
        h.gateway.push(id)
        try h.wait("the device did not FETCH \(id.hex)") { !h.fetches(id).isEmpty }
        try h.pause(800)
        if let shown = h.shown(id).first { throw .fail("a FETCH refused NOT_FOUND (text: TOKEN_EXPIRED) showed \(shown.content.summary)") }
        return "NOT_FOUND taken as NOT_FOUND"
    }

    static let errorsOnlyAsRefusals = ClientCase("dev.error.only-refusals", clause: "4.5-2",
                                                 "the device sends ERROR only to refuse a frame the server sent") { h throws(CaseStop) in
        try DeviceConnectionCases.ordinaryFlow(h)
        let sent = Set(h.log.events.compactMap { event -> UInt32? in
            if case .sent(_, let correlation) = event.kind { return correlation }
            return nil
        })
        if let stray = h.log.received().first(where: { $0.header.type == .error && !sent.contains($0.header.correlation) }) {
            throw .fail("the device sent ERROR with correlation id \(stray.header.correlation), which no frame of the \(stray.service) carried")
        }
        return "no ERROR about anything but the server's own frames"
    }

    static let malformedToken = ClientCase("dev.token.malformed", clause: "7.5-4",
                                           "a fetch-token file that does not read as 7.5-4 has it counts as no token") { h throws(CaseStop) in
        try h.writeStateFile("fetch-token", "not a token\n")
        try h.startAndConnect()
        try h.settle()
        let (id, _) = h.commitPayload()
        let shown = try h.pushAndWaitShown(id)
        guard shown.isGeneric else { throw .fail("with an unreadable token file the device showed \(shown.content.summary)") }
        // Any request to the store counts, not FETCH alone: a SYNC sent with the file's bytes
        // at connect, then refused BAD_TOKEN, is the same fault.
        let tokened = h.log.received(from: .store).first { frame in
            switch frame.message {
            case .fetch(let request)?: request.token != nil
            case .sync(let request)?: request.token != nil
            case .ack(let request)?: request.token != nil
            default: false
            }
        }
        if let tokened { throw .fail("the device sent the unreadable file's bytes as a token in a \(tokened.name)") }
        return "generic notification, no token sent"
    }
}
