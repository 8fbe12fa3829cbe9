import PushClock
import PushWire

/// A provider under faults: BUSY (5.8-4), GOAWAY and lost connections (4.4-2, 5.8-5),
/// refusals at connect (5.8-1), and frames it must survive or refuse (2-2, 2-4, 5.3-5, 6-1).
enum ProviderRecoveryCases {
    static let all: [ClientCase] = [busyRetry, busyGiveUp, goawayRetry, lostNotResent, goawayStop, backoff, unknownType,
                                    strayReply, unknownErrorStatus, badMagic, keepalive]

    static let busyRetry = ProviderCases.provider("prov.busy.retry", clause: "5.8-4",
                                    "a SEND answered BUSY is sent again after a wait, and its id reported") { h throws(CaseStop) in
        h.interceptNextSend { _ in .error(.busy) }
        try h.startClient()
        let id = try ProviderCases.send(h, tag: "b1", extra: " key=cf-busy-1")
        let sends = h.log.messages(.send, to: .store)
        guard sends.count >= 2 else { throw .fail("the provider reported an id without sending the SEND again") }
        let gap = sends[1].atMs - sends[0].atMs
        guard gap >= 90 else { throw .fail("the SEND was sent again \(gap) ms after BUSY (at least 100 ms)") }
        guard h.store.payloads[id] != nil else { throw .fail("the id reported is not the one the store gave") }
        return "sent again after \(gap) ms"
    }

    static let busyGiveUp = ProviderCases.provider("prov.busy.give-up", clause: "5.8-4",
                                     "a SEND the store keeps answering BUSY is retried a bounded number of times with growing waits, then reported BUSY") { h throws(CaseStop) in
        h.store.intercept = { request in
            if case .send = request.message { return .error(.busy) }
            return .faithful
        }
        try h.startClient()
        try h.command("g1 SEND \(h.user) 67 key=cf-busy-2")
        let answer = try h.waitForAnswer("g1", timeoutMs: 60_000)
        guard answer.status == "BUSY" else { throw .fail("a SEND always refused BUSY was answered `\(answer.line)`") }
        let times = h.log.messages(.send, to: .store).map(\.atMs)
        let waits = Backoff.waits(times)
        if let short = waits.first(where: { $0 < 90 }) { throw .fail("a retry came \(short) ms after BUSY (at least 100 ms)") }
        if waits.count >= 3, let last = waits.last, let first = waits.first, last < first + first / 2 {
            throw .fail("the waits between retries do not grow: \(waits.map(String.init).joined(separator: ", ")) ms")
        }
        return "\(times.count) attempts, then ERROR BUSY"
    }

    static let goawayRetry = ProviderCases.provider("prov.goaway.retry", clause: "5.8-5",
                                      "a RECALL above GOAWAY's last_correlation is sent again on the next connection") { h throws(CaseStop) in
        try h.startClient()
        let id = try ProviderCases.send(h, tag: "s1")
        var refused = false
        h.store.intercept = { request in
            guard case .recall = request.message, !refused else { return .faithful }
            refused = true
            return .goaway(.shuttingDown, lastCorrelation: request.correlation - 1, closeAfterMs: 200)
        }
        try h.command("r1 RECALL \(id.hex)")
        let answer = try h.waitForAnswer("r1", timeoutMs: 8_000)
        let recalls = h.log.messages(.recall, to: .store)
        guard recalls.count >= 2, recalls[1].connection != recalls[0].connection else {
            throw .fail("the RECALL was not sent again on a new connection (answered `\(answer.line)`)")
        }
        guard answer.ok else { throw .fail("the RECALL sent again was answered `\(answer.line)`") }
        return "sent again on store connection \(recalls[1].connection)"
    }

    static let lostNotResent = ProviderCases.provider("prov.lost.store-once", clause: "5.8-5",
                                        "a STORE lost with its connection is not sent again (it may have been committed), and is reported") { h throws(CaseStop) in
        try h.startClient()
        try ProviderCases.send(h, tag: "s1")
        h.store.intercept = { request in
            if case .store = request.message { return .close }
            return .faithful
        }
        try h.command("t1 STORE \(h.user) 74")
        let answer = try h.waitForAnswer("t1", timeoutMs: 8_000)
        try h.pause(800)
        let stores = h.log.messages(.store, to: .store).count
        guard stores == 1 else { throw .fail("the STORE was sent \(stores) times; its outcome was unknown") }
        guard !answer.ok else { throw .fail("a STORE whose connection was lost was answered `\(answer.line)`") }
        return "sent once, reported `\(answer.line)`"
    }

    static let goawayStop = ProviderCases.provider("prov.goaway.stop", clause: "4.4-2", "after GOAWAY the provider sends no request on that connection") { h throws(CaseStop) in
        let peer = try ProviderCases.connected(h)
        let connection = h.storeServer.serial(peer)
        let last = h.log.received(from: .store).filter { $0.connection == connection }.map(\.header.correlation).max() ?? 0
        h.storeServer.goaway(.shuttingDown, lastCorrelation: last, to: peer, closeAfterMs: 1_200)
        let goawayAt = Clocks.monotonicMilliseconds()
        try h.pause(100)
        try ProviderCases.send(h, tag: "s2")
        try h.pause(300)
        if let late = h.log.received(from: .store).first(where: { $0.connection == connection && $0.atMs > goawayAt + 50 && ($0.header.type?.isRequest ?? true) }) {
            throw .fail("a \(late.name) reached the store on the connection after GOAWAY")
        }
        return "the next SEND went on a new connection"
    }

    static let backoff = ProviderCases.provider("prov.reconnect.backoff", clause: "5.8-1",
                                  "a store that closes every connection is retried with growing waits") { h throws(CaseStop) in
        h.storeServer.acceptMode = .closeAtOnce
        try h.startClient()
        try h.command("s1 SEND \(h.user) 62 key=cf-backoff")
        try h.pause(DeviceBackoffCases.refusalMs)
        let times = h.log.connectionTimes(.store)
        if let problem = Backoff.problem(times, over: DeviceBackoffCases.refusalMs) { throw .fail(problem) }
        return Backoff.summary(times)
    }

    static let unknownType = ProviderCases.provider("prov.unknown-type", clause: "2-4",
                                      "a frame of an unknown type is answered ERROR UNKNOWN_TYPE and the connection stays") { h throws(CaseStop) in
        let peer = try ProviderCases.connected(h)
        h.storeServer.sendRaw(RawFrame.frame(type: 0x6F, correlation: 0x99, body: []), to: peer)
        try h.wait("no ERROR with correlation id 0x99 came back") {
            h.log.messages(.error, to: .store).contains { $0.header.correlation == 0x99 && $0.header.status == .unknownType }
        }
        try ProviderCases.send(h, tag: "s2")
        guard h.log.messages(.send, to: .store).last?.connection == h.storeConnectionNumber else { throw .fail("the provider left the connection after an unknown type") }
        return "ERROR UNKNOWN_TYPE, connection kept"
    }

    static let strayReply = ProviderCases.provider("prov.reply.unknown-correlation", clause: "5.3-5",
                                     "a reply whose correlation id matches no request is discarded") { h throws(CaseStop) in
        let peer = try ProviderCases.connected(h)
        var frame: [UInt8] = []
        Message.storeOK(StoreOK(id: PayloadID.random(), expiresAt: UInt64(Int64.max))).encode(correlation: 0x7777_0001, into: &frame)
        h.storeServer.sendRaw(frame, to: peer)
        try h.pause(100)
        try ProviderCases.send(h, tag: "s2")
        guard h.log.messages(.send, to: .store).last?.connection == h.storeConnectionNumber else { throw .fail("the provider left the connection over a stray reply") }
        guard h.answers.count == 2 else { throw .fail("the provider wrote \(h.answers.count) answers for 2 commands") }
        return "stray STORE_OK ignored"
    }

    static let unknownErrorStatus = ProviderCases.provider("prov.error.unknown-status", clause: "6-1",
                                             "an ERROR with a status the provider does not know fails that command only") { h throws(CaseStop) in
        try ProviderCases.connected(h)
        h.interceptNextSend { .rawReply(RawFrame.frame(.error, correlation: $0.correlation, status: Status(rawValue: 0x0777))) }
        try h.command("u1 SEND \(h.user) 75")
        let answer = try h.waitForAnswer("u1", timeoutMs: 8_000)
        guard !answer.ok || h.log.messages(.send, to: .store).count >= 3 else {
            throw .fail("a SEND refused with an unknown status was answered `\(answer.line)`")
        }
        try ProviderCases.send(h, tag: "s2")
        guard h.log.messages(.send, to: .store).last?.connection == h.storeConnectionNumber else { throw .fail("the provider left the connection after an unknown status") }
        return "`\(answer.line)`, connection kept"
    }

    static let badMagic = ProviderCases.provider("prov.frame.bad-magic", clause: "2-2",
                                   "a frame with a magic byte other than a7 ends the connection") { h throws(CaseStop) in
        let peer = try ProviderCases.connected(h)
        h.storeServer.sendRaw(RawFrame.header(type: MessageType.storeOK.rawValue, correlation: 5, length: 0, magic: 0x00), to: peer)
        try h.wait("the provider kept the connection open after a frame with magic 00") {
            h.log.closedAt(.store, connection: h.storeConnectionNumber) != nil
        }
        return "closed"
    }

    static let keepalive = ProviderCases.provider("prov.keepalive.ping", clause: "5.4-1",
                                    "with keepalive_ms 1000 granted, the provider sends a frame at least every second while its connection is open",
                                    limits: { $0.store.keepaliveMs = 1_000 }) { h throws(CaseStop) in
        let connection = h.storeServer.serial(try ProviderCases.connected(h))
        // The harness's servers never PING on their own (no sweep runs), so only the
        // client's PINGs can break the silence the case measures.
        let start = Clocks.monotonicMilliseconds()
        try h.pause(3_500)
        if h.log.closedAt(.store, connection: connection) != nil {
            // GOAWAY TIMEOUT: it heard nothing, which a PING would have changed (PONG).
            if h.log.messages(.goaway, to: .store).contains(where: { $0.connection == connection && $0.header.status == .timeout }) {
                throw .fail("the provider sent no PING and closed its connection for silence (GOAWAY TIMEOUT)")
            }
            throw .skip("the provider closed its idle connection (5.5-6 allows it): its keepalive cannot be judged")
        }
        let times = [start] + h.log.received(from: .store).filter { $0.connection == connection && $0.atMs > start }.map(\.atMs)
            + [Clocks.monotonicMilliseconds()]
        let longest = zip(times, times.dropFirst()).map { $1 - $0 }.max() ?? 0
        // A PING a little late is a loaded machine; none for twice the interval is no keepalive.
        guard longest < 2_000 else { throw .fail("the provider sent nothing for \(longest) ms on an open connection with keepalive_ms 1000") }
        return "longest silence \(longest) ms"
    }
}
