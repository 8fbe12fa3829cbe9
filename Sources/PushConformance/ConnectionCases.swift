import PushWire

/// The connection after the handshake (sections 4.1, 4.3 to 4.5, 5.6, 6): one reply
/// per request, GOAWAY, request errors and statuses.
enum ConnectionCases {
    static let all: [ConformanceCase] = [
        ConformanceCase("conn.one-reply-per-request", clause: "4.1-1", "every request gets exactly one reply") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            var bytes: [UInt8] = []
            bytes += Message.ping.encoded(correlation: 21)
            bytes += Message.fetch(Fetch(id: PayloadID.random(), token: nil)).encoded(correlation: 22)
            bytes += RawFrame.frame(type: 0x7E, correlation: 23, body: [1, 2, 3])
            bytes += Message.sync(Sync(token: nil)).encoded(correlation: 24)
            bytes += Message.hello(CaseContext.hello(.device)).encoded(correlation: 25)
            try session.sendRaw(bytes, "five requests")
            let answers = try session.answers(to: [21, 22, 23, 24, 25], "five pipelined requests")
            try session.expectSilence(ms: ctx.quietMs, "five requests already answered once")
            return "PING, FETCH, unknown type, SYNC, HELLO → " + [21, 22, 23, 24, 25].compactMap { answers[$0].map(describe) }.joined(separator: ", ")
        },

        ConformanceCase("conn.ping-pong", clause: "4.3-1", "PING after the handshake is answered PONG with its correlation id") { ctx throws(CaseStop) in
            var where_: [String] = []
            if ctx.options.store != nil {
                try ctx.storeDevice().expectAlive("HELLO_OK")
                where_.append("store")
            }
            if ctx.options.gateway != nil, ctx.options.keys != nil {
                try ctx.gatewayProvider().expectAlive("HELLO_OK")
                where_.append("gateway")
            }
            guard !where_.isEmpty else { throw .skip("needs --store, or --gateway with --data-dir") }
            return "PONG from the " + where_.joined(separator: " and the ")
        },

        ConformanceCase("conn.goaway-last-correlation", clause: "4.4-1", "GOAWAY names the highest request processed") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            for id: UInt32 in [5, 9] {
                try session.send(.ping, correlation: id)
                _ = try session.reply(to: id, waitingFor: "PONG \(id)")
            }
            try session.sendRaw(RawFrame.header(type: MessageType.ping.rawValue, correlation: 10, length: 0, magic: 0xA8), "a frame with a bad magic byte")
            let (_, message) = try session.next(waitingFor: "GOAWAY MALFORMED_FRAME")
            guard case .goaway(let goaway) = message, goaway.status == .malformedFrame else { throw .fail("a bad magic byte was answered \(describe(message))") }
            try Expect.equal(goaway.lastCorrelation, 9, "last_correlation after requests 1, 5 and 9")
            return "GOAWAY MALFORMED_FRAME last_correlation 9"
        },

        ConformanceCase("conn.goaway-then-close", clause: "4.4-2", "the sender of GOAWAY closes the connection after it") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            try session.sendRaw(RawFrame.header(type: MessageType.ping.rawValue, correlation: 2, length: 0, flags: 0x40), "a frame with a flag bit set")
            try Expect.goawayThenClose(session, .malformedFrame, "a flag bit")
            return "GOAWAY MALFORMED_FRAME, then closed with nothing after it"
        },

        ConformanceCase("conn.error-reply", clause: "4.5-1", "ERROR carries the failed request's correlation id and a status other than OK") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            try Expect.refused(session, .fetch(Fetch(id: PayloadID.random(), token: nil)), .authRequired, "FETCH without token")
            try Expect.refused(session, .ack(Ack(id: PayloadID.random(), token: nil)), .authRequired, "ACK without token")
            return "ERROR AUTH_REQUIRED twice, each echoing its request's id"
        },

        ConformanceCase("conn.fatal-stops-reading", clause: "5.6-1", "a fatal fault: GOAWAY with status and last_correlation, close, read nothing more") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            let bad = RawFrame.header(type: MessageType.ping.rawValue, correlation: 2, length: 0, reserved: 1)
            try session.sendRaw(bad + Message.ping.encoded(correlation: 3), "a frame with reserved bits, then a PING")
            let (_, message) = try session.next(waitingFor: "GOAWAY MALFORMED_FRAME")
            guard case .goaway(let goaway) = message, goaway.status == .malformedFrame else { throw .fail("reserved bits were answered \(describe(message))") }
            try Expect.equal(goaway.lastCorrelation, 1, "last_correlation (only HELLO 1 was processed)")
            let after = try session.expectClosed("GOAWAY MALFORMED_FRAME")
            try Expect.that(after.isEmpty, "after GOAWAY the server still answered: \(after.map(describe).joined(separator: ", "))")
            return "GOAWAY MALFORMED_FRAME last_correlation 1; the PING behind it unanswered; closed"
        },

        ConformanceCase("conn.request-error", clause: "5.6-2", "a request error is ERROR with the request's correlation id; the connection stays open") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            try Expect.refusedRaw(session, RawFrame.frame(type: 0x7E, correlation: 0xABCD, body: [0xFF]), .unknownType, "a frame of unknown type 0x7e")
            try session.expectAlive("ERROR UNKNOWN_TYPE")
            try Expect.refusedRaw(session, RawFrame.frame(.recall, correlation: 0xABCE, body: RawFrame.field(.id, [1, 2])), .badRequest, "RECALL with a 2-byte id")
            try session.expectAlive("ERROR BAD_REQUEST")
            return "UNKNOWN_TYPE for 43981 and BAD_REQUEST for 43982, PING answered after each"
        },

        ConformanceCase("conn.no-error-for-replies", clause: "5.6-3", "malformed replies and one-way messages get no ERROR") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            var bytes = RawFrame.frame(.pong, correlation: 41, body: [0x0A, 0x05])
            bytes += RawFrame.frame(.missed, correlation: 0, body: [])
            bytes += RawFrame.frame(.storeOK, correlation: 43, body: RawFrame.field(.id, [1, 2, 3, 4, 5, 6, 7, 8]))
            bytes += RawFrame.frame(.helloOK, correlation: 44, body: RawFrame.field(.version, [1]))
            try session.sendRaw(bytes, "four malformed replies and one-way messages")
            try session.expectSilence(ms: ctx.quietMs, "malformed PONG, MISSED, STORE_OK and HELLO_OK")
            try session.expectAlive("malformed replies")
            return "no answer to a malformed PONG, MISSED, STORE_OK and HELLO_OK; PING still answered"
        },

        ConformanceCase("conn.goaway-received", clause: "5.6-4", "a server that receives GOAWAY with a fatal status closes") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            try session.send(.goaway(Goaway(status: .malformedFrame, lastCorrelation: 0, message: "conformance")), correlation: 0)
            let after = try session.expectClosed("the client's GOAWAY MALFORMED_FRAME")
            try Expect.that(!after.contains { if case .error = $0 { true } else { false } }, "a GOAWAY was answered with ERROR [5.6-3]")
            return "closed after the client's GOAWAY"
        },

        ConformanceCase("conn.unknown-status", clause: "6-1", "an unknown status is non-fatal in ERROR and ends the connection in GOAWAY") { ctx throws(CaseStop) in
            let unknown = Status(rawValue: 0x0077)
            let session = try ctx.storeDevice()
            try session.send(.error(ErrorReply(status: unknown)), correlation: 55)
            try session.expectSilence(ms: ctx.quietMs, "an unsolicited ERROR with status 0x77")
            try session.expectAlive("ERROR with an unknown status")
            try session.send(.goaway(Goaway(status: unknown, lastCorrelation: 0)), correlation: 0)
            _ = try session.expectClosed("GOAWAY with status 0x77")
            return "ERROR 0x77 ignored, connection open; GOAWAY 0x77 → closed"
        },

        ConformanceCase("conn.fatal-in-goaway", clause: "6-2", "fatal statuses arrive only in GOAWAY, and the sender closes") { ctx throws(CaseStop) in
            let faults: [(String, [UInt8], Status)] = [
                ("header version 2", RawFrame.header(type: MessageType.ping.rawValue, correlation: 2, length: 0, version: 2), .unsupportedVersion),
                ("length over max_frame", RawFrame.header(type: MessageType.ping.rawValue, correlation: 2, length: 0x00FF_FFFF), .frameTooLarge),
                ("bad magic", RawFrame.header(type: MessageType.ping.rawValue, correlation: 2, length: 0, magic: 0x00), .malformedFrame),
            ]
            for (what, bytes, status) in faults {
                let session = try ctx.storeDevice(maxFrame: 4096)
                try session.sendRaw(bytes, what)
                try Expect.goawayThenClose(session, status, what)
            }
            return "UNSUPPORTED_VERSION, FRAME_TOO_LARGE, MALFORMED_FRAME each in GOAWAY, then closed"
        },

        ConformanceCase("conn.nonfatal-in-error", clause: "6-3", "non-fatal statuses arrive in ERROR and the connection stays open") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            try Expect.refused(session, .sync(Sync(token: nil)), .authRequired, "SYNC without token")
            try session.expectAlive("ERROR AUTH_REQUIRED")
            try Expect.refused(session, .sync(Sync(token: [1, 2, 3])), .badToken, "SYNC with a 3-byte token")
            try session.expectAlive("ERROR BAD_TOKEN")
            try Expect.refused(session, .status(StatusRequest(id: PayloadID.random())), .forbidden, "STATUS from a device")
            try session.expectAlive("ERROR FORBIDDEN")
            return "AUTH_REQUIRED, BAD_TOKEN, FORBIDDEN in ERROR; PING answered after each"
        },

        ConformanceCase("conn.never-ok", clause: "6-4", "the server's ERRORs never carry OK") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            for (id, bytes) in [(61, RawFrame.frame(type: 0x7D, correlation: 61, body: [])),
                                (62, Message.fetch(Fetch(id: PayloadID.random(), token: [0])).encoded(correlation: 62))] {
                try session.sendRaw(bytes, "request \(id)")
                let (_, message) = try session.next(waitingFor: "ERROR \(id)")
                guard case .error(let error) = message else { throw .fail("request \(id) was answered \(describe(message)), expected ERROR") }
                try Expect.that(error.status != .ok, "ERROR with status OK")
            }
            return "ERROR for an unknown type and a bad token carried non-OK statuses"
        },

        ConformanceCase("conn.ok-in-error-goaway", clause: "6-6", "ERROR with OK is not answered; GOAWAY with OK still ends the connection") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            try session.send(.error(ErrorReply(status: .ok, message: "conformance")), correlation: 99)
            try session.expectSilence(ms: ctx.quietMs, "an unsolicited ERROR carrying OK")
            try session.expectAlive("an ERROR carrying OK")
            try session.send(.goaway(Goaway(status: .ok, lastCorrelation: 0)), correlation: 0)
            let after = try session.expectClosed("GOAWAY with status OK (to be treated as INTERNAL)")
            try Expect.that(!after.contains { if case .error = $0 { true } else { false } }, "a GOAWAY carrying OK was answered with ERROR [5.6-3]")
            return "ERROR OK: no answer, connection open; GOAWAY OK: closed"
        },

        ConformanceCase("conn.hello-processed", clause: "4.4-3", "an accepted HELLO counts as processed; the refused frame does not") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            // HELLO was request 1; nothing else has been sent.
            try session.sendRaw(RawFrame.header(type: MessageType.ping.rawValue, correlation: 40, length: 0, reserved: 1), "a PING with reserved bits set")
            let goaway = try Expect.goawayThenClose(session, .malformedFrame, "reserved bits right after HELLO_OK")
            try Expect.equal(goaway.lastCorrelation, 1, "last_correlation after HELLO 1 and a refused frame 40")
            return "GOAWAY MALFORMED_FRAME last_correlation 1 (the HELLO), not 40"
        },

        ConformanceCase("conn.client-goaway", clause: "5.5-5", "after a client's GOAWAY the server reads and answers nothing more, and closes") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            var bytes = Message.ping.encoded(correlation: 5)
            bytes += Message.goaway(Goaway(status: .shuttingDown, lastCorrelation: 0, message: "conformance")).encoded(correlation: 0)
            bytes += Message.ping.encoded(correlation: 6)
            bytes += Message.fetch(Fetch(id: PayloadID.random(), token: nil)).encoded(correlation: 7)
            try session.sendRaw(bytes, "PING 5, GOAWAY SHUTTING_DOWN, PING 6, FETCH 7")
            let after = try session.expectClosed("the client's GOAWAY SHUTTING_DOWN")
            let pongs = after.filter { $0 == .pong }.count
            try Expect.that(pongs <= 1, "\(pongs) PONGs for one PING before the GOAWAY and one after it")
            try Expect.that(!after.contains { if case .error = $0 { true } else { false } }, "the server answered after the client's GOAWAY: \(after.map(describe).joined(separator: ", "))")
            try Expect.that(after.allSatisfy { $0 == .pong }, "the server sent \(after.map(describe).joined(separator: ", ")) after the client's GOAWAY")
            return "closed; " + (pongs == 1 ? "PONG 5 only" : "nothing sent") + "; PING 6 and FETCH 7 unanswered"
        },
    ]
}
