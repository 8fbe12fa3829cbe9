import PushClock
import PushWire

/// The connection rules a provider shares with a device, judged on its store connection:
/// fatal frames (5.6-1, 4.4-5), the end of its input (5.5-6), unknown fields (3.4-2),
/// silence (5.4-2), GOAWAY's forms (5.5-2, 5.6-4, 6-4), an ERROR with status OK (6-6), and
/// the waits between attempts (5.8-2, 5.8-3).
enum ProviderConnectionCases {
    static let all: [ClientCase] = [fatalGoaway, goawayLastCorrelation, endOfInput, unknownField, silentStore, goawayCloses, goawayWithOK, errorWithOK,
                                    drain, jitter, helloRefused]

    static let fatalGoaway = ProviderCases.provider("prov.frame.goaway-status", clause: "5.6-1",
                                                    "on a fatal frame the provider sends GOAWAY with its status before it closes") { h throws(CaseStop) in
        let peer = try ProviderCases.connected(h)
        let goaway = try h.goawayAfterFatalFrame(on: .store) { h.storeServer.sendRaw($0, to: peer) }
        guard goaway.header.status == .unsupportedVersion else { throw .fail("the GOAWAY carries \(goaway.header.status), not UNSUPPORTED_VERSION") }
        return "GOAWAY UNSUPPORTED_VERSION, then closed"
    }

    static let goawayLastCorrelation = ProviderCases.provider("prov.goaway.last-correlation", clause: "4.4-5",
                                                              "the provider's GOAWAY on a fatal frame names the last PING it answered in last_correlation") { h throws(CaseStop) in
        let peer = try ProviderCases.connected(h)
        let ping: UInt32 = 0x0200_0001
        h.storeServer.send(.ping, correlation: ping, to: peer)
        try h.wait("no PONG to the store's PING") {
            h.log.messages(.pong, to: .store).contains { $0.header.correlation == ping }
        }
        guard case .goaway(let goaway)? = try h.goawayAfterFatalFrame(on: .store, send: { h.storeServer.sendRaw($0, to: peer) }).message else {
            throw .fail("the provider's GOAWAY does not decode")
        }
        guard goaway.lastCorrelation == ping else {
            throw .fail("the GOAWAY's last_correlation is \(goaway.lastCorrelation), not \(ping), the PING the provider answered")
        }
        return "last_correlation \(ping)"
    }

    static let endOfInput = ProviderCases.provider("prov.eof.answers", clause: "5.5-6",
                                                   "at the end of stdin the provider waits for the reply it needs, answers, and exits 0") { h throws(CaseStop) in
        try h.startClient()
        try ProviderCases.send(h, tag: "s1")
        let held = h.interceptNextSend { _ in .later(ms: 700, .faithful) }
        try h.command("e1 SEND \(h.user) 656f66")
        try h.wait("the provider did not SEND") { held.request != nil }
        h.endInput()
        let status = try h.waitForExit(timeoutMs: 8_000)
        guard let answer = h.answer("e1") else { throw .fail("the provider exited without answering `e1`") }
        guard answer.ok else { throw .fail("the SEND whose reply came 700 ms after the end of input was answered `\(answer.line)`") }
        if let early = h.log.messages(.goaway, to: .store).first(where: { $0.atMs < held.atMs + 650 }) {
            throw .fail("the provider sent GOAWAY \(early.header.status) before the reply it waited for")
        }
        guard status == 0 else { throw .fail("the provider exited with status \(status) at the end of its input") }
        return "answered `\(answer.line)`, then exited 0"
    }

    static let unknownField = ProviderCases.provider("prov.field.unknown", clause: "3.4-2",
                                                     "a SEND_OK with a field of an unknown tag is read like any SEND_OK") { h throws(CaseStop) in
        var stored: PayloadID?
        h.store.intercept = { [unowned store = h.store] request in
            guard case .send = request.message else { return .faithful }
            let reply = store.faithfulReply(request.message)
            if case .sendOK(let ok) = reply { stored = ok.id }
            var frame: [UInt8] = []
            reply.encode(correlation: request.correlation, into: &frame)
            let body = Array(frame[FrameHeader.size...]) + RawFrame.field(0x7E, Array("later revision".utf8))
            return .rawReply(RawFrame.frame(type: frame[2], correlation: request.correlation, body: body))
        }
        try h.startClient()
        let id = try ProviderCases.send(h, tag: "u1")
        guard id == stored else { throw .fail("the provider reported \(id.hex), not the id of the SEND_OK") }
        return "unknown tag skipped"
    }

    static let silentStore = ProviderCases.provider("prov.keepalive.silent", clause: "5.4-2",
                                                    "a store silent for 1.5 x keepalive_ms (1000) is closed",
                                                    limits: { $0.store.keepaliveMs = 1_000 }) { h throws(CaseStop) in
        let peer = try ProviderCases.connected(h)
        // Nothing answered, not even PING: the provider hears nothing at all from here on.
        h.storeServer.mute(peer)
        let mutedAt = Clocks.monotonicMilliseconds()
        let lastHeard = h.log.events.filter { $0.service == .store && $0.connection == h.storeConnectionNumber && $0.atMs <= mutedAt }.last?.atMs ?? mutedAt
        try h.wait("the provider kept a silent connection open", timeoutMs: 3_500) { h.log.closedAt(.store, connection: h.storeConnectionNumber) != nil }
        let after = (h.log.closedAt(.store, connection: h.storeConnectionNumber) ?? mutedAt) - lastHeard
        guard after >= 1_450 else { throw .fail("the provider closed the connection \(after) ms after it last heard anything, before 1.5 x keepalive_ms") }
        return "closed \(after) ms after it last heard anything"
    }

    /// A case that sends GOAWAY `status` (last_correlation 0) and expects the provider to close.
    static func goawayEnds(_ id: String, clause: String, _ status: Status, _ title: String) -> ClientCase {
        ProviderCases.provider(id, clause: clause, title) { h throws(CaseStop) in
            let peer = try ProviderCases.connected(h)
            let goaway = RawFrame.frame(.goaway, correlation: 0, status: status, body: RawFrame.field(.lastCorrelation, RawFrame.bigEndian(UInt32(0))))
            h.storeServer.sendRaw(goaway, to: peer)
            try h.wait("the provider kept the connection open after GOAWAY \(status)") {
                h.log.closedAt(.store, connection: h.storeConnectionNumber) != nil
            }
            return "closed"
        }
    }

    static let goawayCloses = goawayEnds("prov.goaway.close", clause: "5.6-4", .timeout,
                                         "after a GOAWAY other than SHUTTING_DOWN the provider closes the connection")
    static let goawayWithOK = goawayEnds("prov.goaway.ok-status", clause: "6-4", .ok, "a GOAWAY whose status is OK still ends the connection")

    static let errorWithOK = ProviderCases.provider("prov.error.ok-status", clause: "6-6",
                                                    "a SEND always refused by an ERROR whose status is OK is reported failed (INTERNAL), never OK, and the connection stays") { h throws(CaseStop) in
        try ProviderCases.connected(h)
        h.store.intercept = { request in
            guard case .send = request.message else { return .faithful }
            return .rawReply(RawFrame.frame(.error, correlation: request.correlation, status: .ok))
        }
        try h.command("e1 SEND \(h.user) 6f6b")
        let answer = try h.waitForAnswer("e1", timeoutMs: 30_000)
        guard answer.status == "INTERNAL" else { throw .fail("a SEND answered ERROR with status OK was reported `\(answer.line)`, not `e1 ERROR INTERNAL`") }
        guard h.log.closedAt(.store, connection: h.storeConnectionNumber) == nil else {
            throw .fail("the provider closed the store connection over an ERROR with status OK")
        }
        return "`\(answer.line)`, connection kept"
    }

    static let drain = ProviderCases.provider("prov.goaway.drain", clause: "5.5-2",
                                              "after GOAWAY SHUTTING_DOWN the provider still takes the replies up to last_correlation") { h throws(CaseStop) in
        try h.startClient()
        try ProviderCases.send(h, tag: "s1")
        let held = h.interceptNextSend { .goaway(.shuttingDown, lastCorrelation: $0.correlation, closeAfterMs: 600) }
        try h.command("d1 SEND \(h.user) 6472")
        try h.wait("the provider did not SEND") { held.request != nil }
        guard let request = held.request, let peer = h.store.peers.last else { throw .fail("the store connection is gone") }
        // The reply the GOAWAY promised, 300 ms after it.
        let reply = h.store.faithfulReply(request.message)
        try h.pause(300)
        guard h.log.closedAt(.store, connection: request.connection) == nil else {
            throw .fail("the provider closed the connection after GOAWAY SHUTTING_DOWN before the reply it promised came")
        }
        h.storeServer.respond(reply, correlation: request.correlation, to: peer)
        let answer = try h.waitForAnswer("d1", timeoutMs: 8_000)
        guard case .sendOK(let ok) = reply, answer.ok, answer.words.first == ok.id.hex else {
            throw .fail("the SEND answered after GOAWAY was reported `\(answer.line)`")
        }
        let sends = h.log.messages(.send, to: .store).count
        return sends == 2 ? "the reply after GOAWAY was used" : "reported OK (\(sends) SENDs in all)"
    }

    /// Has the gateway refuse for `DeviceBackoffCases.refusalMs` while a PUSH waits for it,
    /// then returns when each attempt began.
    static func attempts(_ h: ClientHarness, refusing refuse: (ClientHarness) -> Void) throws(CaseStop) -> [Int64] {
        try h.startClient()
        let id = try ProviderCases.send(h, tag: "s1")
        refuse(h)
        let start = Clocks.monotonicMilliseconds()
        try h.command("p1 PUSH \(h.user) \(id.hex)")
        try h.pause(DeviceBackoffCases.refusalMs)
        return h.log.connectionTimes(.gateway).filter { $0 >= start }
    }

    static let jitter = ProviderCases.provider("prov.reconnect.jitter", clause: "5.8-2",
                                               "the waits between attempts are drawn at random, not an exact series") { h throws(CaseStop) in
        let times = try attempts(h) { $0.gatewayServer.acceptMode = .closeAtOnce }
        let waits = Backoff.waits(times)
        guard waits.filter({ $0 >= 150 }).count >= 3 else {
            throw .skip("only \(times.count) attempts in \(DeviceBackoffCases.refusalMs) ms: too few waits to judge (\(Backoff.summary(times)))")
        }
        if Backoff.looksExact(waits) { throw .fail("the waits follow an exact series: \(waits.map(String.init).joined(separator: ", ")) ms") }
        return Backoff.summary(times)
    }

    static let helloRefused = ProviderCases.provider("prov.reconnect.hello-refused", clause: "5.8-3",
                                                     "a connection whose HELLO is refused (BUSY) counts as a failed attempt: the waits still grow") { h throws(CaseStop) in
        let times = try attempts(h) { $0.gateway.refuseHello = .busy }
        if let problem = Backoff.problem(times, over: DeviceBackoffCases.refusalMs) {
            throw .fail(problem + " (each connection's HELLO was answered BUSY)")
        }
        return Backoff.summary(times)
    }
}
