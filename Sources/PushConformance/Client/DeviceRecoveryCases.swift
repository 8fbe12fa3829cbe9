import PushClock
import PushWire

/// What brings a lost push back (SYNC: 4.15-2, 4.9-2), GOAWAY (4.4-2, 5.8-5), a restart
/// (4.14-11), and frames a device must survive or refuse (2-2, 2-4, 2-7, 2-12, 5.3-5,
/// 5.6-3, 6-1).
enum DeviceRecoveryCases {
    static let all: [ClientCase] = [syncOnConnect, syncOnMissed, syncCursor, storeRestart, goawayStop, goawayRetry, partialFrame,
                                    restart, restartAfterKill, unknownErrorStatus, unknownGoawayStatus, strayReply,
                                    unknownType, badMagic, tooLarge, malformedMissed]

    static let syncOnConnect = ClientCase("dev.sync.store-connect", clause: "4.15-2",
                                          "on connecting to the store the device SYNCs and shows what it lists") { h throws(CaseStop) in
        let (id, content) = h.commitPayload()
        try h.giveToken()
        try h.startAndConnect()
        try h.wait("the device did not show \(id.hex), which only a SYNC lists") { !h.shown(id).isEmpty }
        guard h.shown(id)[0].content == .payload(content) else { throw .fail("shown as \(h.shown(id)[0].content.summary)") }
        return "listed by SYNC, fetched and shown"
    }

    static let syncOnMissed = ClientCase("dev.sync.missed", clause: "4.15-2",
                                         "on MISSED the device SYNCs and shows what the store lists") { h throws(CaseStop) in
        try h.startLoggedIn()
        let syncs = h.log.messages(.sync, to: .store).count
        let (id, content) = h.commitPayload()
        h.gateway.send(.missed(Missed(missedCount: 3)))
        try h.wait("after MISSED the device did not SYNC") { h.log.messages(.sync, to: .store).count > syncs }
        try h.wait("the device did not show \(id.hex), which the SYNC after MISSED listed") { !h.shown(id).isEmpty }
        guard h.shown(id)[0].content == .payload(content) else { throw .fail("shown as \(h.shown(id)[0].content.summary)") }
        return "SYNC after MISSED, shown"
    }

    static let syncCursor = ClientCase("dev.sync.cursor", clause: "4.9-2",
                                       "a SYNC's cursor is 0 or one the store gave, never one the device made") { h throws(CaseStop) in
        let payloads = (0..<3).map { _ in h.commitPayload() }
        h.store.intercept = { [unowned store = h.store] request in
            guard case .sync(let sync) = request.message, sync.cursor == 0 else { return .faithful }
            return .reply(.syncOK(store.page(after: 0, limit: 2)))
        }
        try h.giveToken()
        try h.startAndConnect()
        try h.wait("the device did not show the 2 newest payloads of the first SYNC page") {
            payloads.suffix(2).allSatisfy { !h.shown($0.id).isEmpty }
        }
        try h.pause(800)
        let cursors = h.log.messages(.sync, to: .store).compactMap { frame -> UInt64? in
            if case .sync(let sync)? = frame.message { return sync.cursor }
            return nil
        }
        let given = HarnessStore.cursorBase + 2
        if let made = cursors.first(where: { $0 != 0 && $0 != given }) {
            throw .fail("a SYNC carried cursor \(made), which the store never gave (it gave \(given))")
        }
        return cursors.contains(given) ? "paged with the store's cursor" : "did not page (older_count, 4.9-5); every cursor 0"
    }

    static let storeRestart = ClientCase("dev.store.restart", clause: "4.15-2",
                                         "after the store restarts the device SYNCs on its new connection and shows what it missed") { h throws(CaseStop) in
        try h.startLoggedIn()
        h.storeServer.acceptMode = .closeAtOnce
        try h.storeConnection().connection.close()
        let (id, content) = h.commitPayload()
        try h.pause(1_000)
        h.storeServer.acceptMode = .serve
        try h.wait("the device did not show \(id.hex), committed while the store was down and named by no push", timeoutMs: 10_000) {
            !h.shown(id).isEmpty
        }
        guard h.shown(id)[0].content == .payload(content) else { throw .fail("shown as \(h.shown(id)[0].content.summary)") }
        return "SYNC on the new store connection, shown"
    }

    static let goawayStop = ClientCase("dev.goaway.stop", clause: "4.4-2",
                                       "after GOAWAY the device sends no request on that connection") { h throws(CaseStop) in
        try h.startLoggedIn()
        let peer = try h.storeConnection()
        let last = h.log.received(from: .store).filter { $0.connection == h.storeConnectionNumber }.map(\.header.correlation).max() ?? 0
        h.storeServer.goaway(.shuttingDown, lastCorrelation: last, to: peer, closeAfterMs: 1_200)
        let goawayAt = Clocks.monotonicMilliseconds()
        try h.pause(100)
        let (id, _) = h.commitPayload()
        h.gateway.push(id)
        try h.pause(1_300)
        let late = h.log.received(from: .store).filter {
            $0.connection == h.storeConnectionNumber && $0.atMs > goawayAt + 50 && ($0.header.type?.isRequest ?? true)
        }
        if let request = late.first {
            throw .fail("a \(request.header.type.map { "\($0)" } ?? "frame") reached the store on the connection \(request.atMs - goawayAt) ms after GOAWAY")
        }
        return "nothing sent on the connection after GOAWAY"
    }

    static let goawayRetry = ClientCase("dev.goaway.retry", clause: "5.8-5",
                                        "a FETCH above GOAWAY's last_correlation is asked again on the next connection") { h throws(CaseStop) in
        try h.startLoggedIn()
        let (id, content) = h.commitPayload()
        var refused = false
        h.store.intercept = { request in
            switch request.message {
            case .fetch where !refused:
                refused = true
                return .goaway(.shuttingDown, lastCorrelation: request.correlation - 1, closeAfterMs: 200)
            case .sync where refused:
                // Only the device's memory of the FETCH it lost can bring the id back.
                return .reply(.syncOK(SyncOK(ids: [], cursor: HarnessStore.cursorBase, hasMore: false)))
            default:
                return .faithful
            }
        }
        h.gateway.push(id)
        try h.wait("the device did not FETCH \(id.hex) again after GOAWAY SHUTTING_DOWN left it unprocessed", timeoutMs: 6_000) {
            h.fetches(id).count >= 2
        }
        try h.wait("the device did not show \(id.hex)") { !h.shown(id).isEmpty }
        guard h.shown(id).count == 1, h.shown(id)[0].content == .payload(content) else {
            throw .fail("\(id.hex) was shown \(h.shown(id).count) times, first as \(h.shown(id)[0].content.summary)")
        }
        let connection = h.fetches(id)[1].connection
        return "asked again on store connection \(connection), shown once"
    }

    static let partialFrame = ClientCase("dev.reconnect.midframe", clause: "2-12",
                                         "a frame cut off by the connection's end is discarded, and the PUSH sent again is shown once") { h throws(CaseStop) in
        try h.startLoggedIn()
        let (id, content) = h.commitPayload()
        var frame: [UInt8] = []
        Message.push(Push(target: nil, id: id.bytes)).encode(correlation: h.gateway.correlation(), into: &frame)
        guard let first = h.gateway.device else { throw .fail("the device is not connected to the gateway") }
        h.gateway.onAdmitted = { [unowned gateway = h.gateway] _ in gateway.push(id) }
        h.gatewayServer.sendRaw(Array(frame.prefix(frame.count - 4)), to: first)
        first.connection.closeAfterFlush(timeout: .seconds(1))
        try h.wait("the device did not show \(id.hex) after reconnecting", timeoutMs: 8_000) { !h.shown(id).isEmpty }
        try h.pause(300)
        guard h.shown(id).count == 1, h.shown(id)[0].content == .payload(content) else {
            throw .fail("\(id.hex) shown \(h.shown(id).count) times")
        }
        if h.log.messages(.deliveryAck, to: .gateway).contains(where: { $0.connection == h.gatewayConnectionNumber }) {
            throw .fail("the device acknowledged the PUSH that was cut off")
        }
        return "partial frame dropped; shown once from the PUSH sent again"
    }

    /// Shows a payload, stops the device (`crash`: SIGKILL once the ACK is in), starts it
    /// again, and has the store and the gateway name the id again.
    static func restarted(crash: Bool) -> ClientCase.Body {
        { h throws(CaseStop) in
            try h.startLoggedIn()
            let (id, _) = h.commitPayload()
            try h.pushAndWaitShown(id)
            try h.wait("no ACK of \(id.hex) reached the store") { !h.acks(id).isEmpty }
            h.stopClient(crash: crash)
            // As if the ACK had not been committed: the store lists the id again.
            h.store.intercept = { request in
                if case .sync = request.message { return .reply(.syncOK(SyncOK(ids: [id], cursor: HarnessStore.cursorBase + 1, hasMore: false))) }
                return .faithful
            }
            let syncs = h.log.messages(.sync, to: .store).count
            try h.startAndConnect()
            try h.wait("the restarted device did not SYNC") { h.log.messages(.sync, to: .store).count > syncs }
            h.gateway.push(id)
            try h.pause(1_000)
            guard h.shown(id).count == 1 else { throw .fail("after a restart (\(crash ? "SIGKILL" : "SIGTERM")) the device showed \(id.hex) again") }
            return "shown once across a \(crash ? "SIGKILL" : "SIGTERM") restart"
        }
    }

    static let restart = ClientCase("dev.restart.show-once", clause: "4.14-11",
                                    "an id shown before a restart is not shown again after it", body: restarted(crash: false))

    static let restartAfterKill = ClientCase("dev.restart.kill", clause: "4.14-11",
                                             "an id acknowledged before a SIGKILL is not shown again after the restart", body: restarted(crash: true))

    static let unknownErrorStatus = ClientCase("dev.error.unknown-status", clause: "6-1",
                                               "an ERROR with a status the device does not know fails that request only") { h throws(CaseStop) in
        try h.startLoggedIn()
        let (id, _) = h.commitPayload()
        var answered = false
        h.store.intercept = { request in
            guard case .fetch = request.message, !answered else { return .faithful }
            answered = true
            return .rawReply(RawFrame.frame(.error, correlation: request.correlation, status: Status(rawValue: 0x0777)))
        }
        h.gateway.push(id)
        try h.wait("the device did not FETCH \(id.hex)") { answered }
        try h.pause(1_000)
        if let closedAt = h.log.closedAt(.store, connection: h.storeConnectionNumber) { _ = closedAt; throw .fail("the store connection closed after an ERROR with an unknown status") }
        if h.log.messages(.goaway, to: .store).contains(where: { $0.connection == h.storeConnectionNumber }) { throw .fail("the device sent GOAWAY after an ERROR with an unknown status") }
        return "connection kept"
    }

    static let unknownGoawayStatus = ClientCase("dev.goaway.unknown-status", clause: "6-1",
                                                "a GOAWAY with a status the device does not know ends the connection, and the device comes back") { h throws(CaseStop) in
        try h.startLoggedIn()
        let (id, content) = h.commitPayload()
        h.gateway.onAdmitted = { [unowned gateway = h.gateway] _ in gateway.push(id) }
        let body = RawFrame.field(.lastCorrelation, RawFrame.bigEndian(UInt32(0)))
        h.gateway.sendRaw(RawFrame.frame(.goaway, correlation: 0, status: Status(rawValue: 0x0777), body: body))
        if let device = h.gateway.device { device.connection.closeAfterFlush(timeout: .seconds(1)) }
        try h.wait("the device did not connect to the gateway again", timeoutMs: 8_000) { h.log.connectionCount(.gateway) >= 2 }
        try h.wait("the device did not show \(id.hex), pushed on the new connection") { !h.shown(id).isEmpty }
        guard h.shown(id)[0].content == .payload(content) else { throw .fail("shown as \(h.shown(id)[0].content.summary)") }
        return "reconnected and shown"
    }

    static let strayReply = ClientCase("dev.reply.unknown-correlation", clause: "5.3-5",
                                       "a reply whose correlation id matches no request is discarded") { h throws(CaseStop) in
        try h.startLoggedIn()
        let peer = try h.storeConnection()
        let stray = PayloadID.random()
        var frame: [UInt8] = []
        Message.fetchOK(FetchOK(id: stray, payload: Array("stray".utf8), createdAt: 1, expiresAt: UInt64(Int64.max)))
            .encode(correlation: 0x7777_0001, into: &frame)
        h.storeServer.sendRaw(frame, to: peer)
        let (id, content) = h.commitPayload()
        try h.pause(100)
        let shown = try h.pushAndWaitShown(id)
        guard shown.content == .payload(content) else { throw .fail("shown as \(shown.content.summary)") }
        guard h.shown(stray).isEmpty else { throw .fail("the device showed the stray reply's payload") }
        guard h.log.closedAt(.store, connection: h.storeConnectionNumber) == nil else { throw .fail("the device closed the store connection over a stray reply") }
        return "stray FETCH_OK ignored"
    }

    static let unknownType = ClientCase("dev.unknown-type", clause: "2-4",
                                        "a frame of an unknown type is answered ERROR UNKNOWN_TYPE and the connection stays") { h throws(CaseStop) in
        try h.startLoggedIn()
        h.gateway.sendRaw(RawFrame.frame(type: 0x6F, correlation: 0x99, body: RawFrame.field(0x7E, [1, 2, 3])))
        try h.wait("no ERROR with correlation id 0x99 came back") {
            h.log.messages(.error, to: .gateway).contains { $0.header.correlation == 0x99 }
        }
        guard let error = h.log.messages(.error, to: .gateway).first(where: { $0.header.correlation == 0x99 }),
              error.header.status == .unknownType else {
            throw .fail("the ERROR does not carry UNKNOWN_TYPE")
        }
        try h.pause(300)
        guard h.log.closedAt(.gateway, connection: h.gatewayConnectionNumber) == nil else { throw .fail("the device closed the connection after an unknown type") }
        return "ERROR UNKNOWN_TYPE, connection kept"
    }

    /// The gateway sends `bytes`; the device must close the connection within 1.5 s.
    static func fatal(_ bytes: [UInt8], _ what: String) -> ClientCase.Body {
        { h throws(CaseStop) in
            try h.startLoggedIn()
            h.gateway.sendRaw(bytes)
            try h.wait("the device kept the connection open after \(what)") {
                h.log.closedAt(.gateway, connection: h.gatewayConnectionNumber) != nil
            }
            if h.log.messages(.deliveryAck, to: .gateway).contains(where: { $0.connection == h.gatewayConnectionNumber }) {
                throw .fail("the device acknowledged a PUSH after \(what)")
            }
            return "closed"
        }
    }

    static let badMagic = ClientCase("dev.frame.bad-magic", clause: "2-2",
                                     "a frame with a magic byte other than a7 ends the connection",
                                     body: fatal(RawFrame.header(type: MessageType.push.rawValue, correlation: 5, length: 0, magic: 0x00)
                                                 + RawFrame.frame(.push, correlation: 6, body: RawFrame.field(.id, PayloadID.random().bytes)),
                                                 "a frame with magic 00"))

    static let tooLarge = ClientCase("dev.frame.too-large", clause: "2-7",
                                     "a header announcing more than the negotiated max_frame ends the connection",
                                     body: fatal(RawFrame.header(type: MessageType.push.rawValue, correlation: 5, length: 1 << 20)
                                                 + [UInt8](repeating: 0x2E, count: 32 * 1_024),
                                                 "a header announcing 1 MiB"))

    static let malformedMissed = ClientCase("dev.missed.malformed", clause: "5.6-3",
                                            "a malformed MISSED is discarded: no ERROR, the connection stays") { h throws(CaseStop) in
        try h.startLoggedIn()
        h.gateway.sendRaw(RawFrame.frame(.missed, correlation: 0, body: []))
        try h.pause(800)
        if h.log.messages(.error, to: .gateway).contains(where: { $0.connection == h.gatewayConnectionNumber }) {
            throw .fail("the device answered a malformed MISSED with ERROR")
        }
        guard h.log.closedAt(.gateway, connection: h.gatewayConnectionNumber) == nil else { throw .fail("the device closed the connection over a malformed MISSED") }
        return "discarded"
    }
}
