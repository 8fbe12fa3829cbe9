import PushSecurity
import PushWire

/// HELLO, HELLO_OK and the negotiation of sections 4.2, 5.1 and 5.2.
enum HandshakeCases {
    static let all: [ConformanceCase] = [
        ConformanceCase("hello.store-device", clause: "4.2-1", "HELLO opens a connection and is answered HELLO_OK") { ctx throws(CaseStop) in
            let session = try ctx.connectStore()
            let id = try session.send(.hello(CaseContext.hello(.device)))
            let (header, message) = try session.next(waitingFor: "HELLO_OK")
            guard case .helloOK(let ok) = message else { throw .fail("a device HELLO was answered \(describe(message))") }
            try Expect.equal(header.correlation, id, "HELLO_OK correlation")
            try Expect.that(ok.version == 1, "HELLO_OK chose version \(ok.version), the only common one is 1")
            return "HELLO_OK version \(ok.version), max_frame \(ok.maxFrame), keepalive_ms \(ok.keepaliveMs), max_inflight \(ok.maxInflight)"
        },

        ConformanceCase("hello.version-range", clause: "5.2-1", "a version range that contains 1 gets version 1") { ctx throws(CaseStop) in
            let session = try ctx.connectStore()
            var hello = CaseContext.hello(.device)
            hello.versionMax = 3
            let ok = try session.open(hello)
            try Expect.equal(ok.version, 1, "version chosen from [1, 3]")
            return "[1, 3] → version 1"
        },

        ConformanceCase("hello.version-none", clause: "5.2-1", "a version range without 1 gets GOAWAY UNSUPPORTED_VERSION") { ctx throws(CaseStop) in
            let session = try ctx.connectStore()
            var hello = CaseContext.hello(.device)
            (hello.versionMin, hello.versionMax) = (2, 3)
            try session.send(.hello(hello))
            try Expect.goawayThenClose(session, .unsupportedVersion, "HELLO with versions [2, 3]")
            return "[2, 3] → GOAWAY UNSUPPORTED_VERSION, closed"
        },

        ConformanceCase("hello.header-version", clause: "5.2-2", "HELLO_OK carries header version 1 whatever the client speaks") { ctx throws(CaseStop) in
            // The session's decoder accepts header version 1 only, so a HELLO_OK with any
            // other version byte fails here as an invalid frame.
            let session = try ctx.connectStore()
            var hello = CaseContext.hello(.device)
            hello.versionMax = 9
            _ = try session.open(hello)
            try session.expectAlive("HELLO_OK")
            return "HELLO [1, 9] answered with header version 1; PING/PONG at version 1"
        },

        ConformanceCase("hello.max-frame", clause: "5.2-3", "max_frame is the smaller of the proposal (65536 if absent) and the server's limit") { ctx throws(CaseStop) in
            func negotiate(_ proposal: Int?) throws(CaseStop) -> Int {
                Int(try ctx.connectStore().open(CaseContext.hello(.device, maxFrame: proposal)).maxFrame)
            }
            let limit = try negotiate(FrameLimits.ceiling)
            try Expect.that((FrameLimits.floor...FrameLimits.ceiling).contains(limit), "the server's limit \(limit) is outside 1024...16777216 [5.2-4]")
            let absent = try negotiate(nil)
            try Expect.equal(absent, min(FrameLimits.defaultMaxFrame, limit), "max_frame without a proposal")
            let small = try negotiate(2048)
            try Expect.equal(small, min(2048, limit), "max_frame for a proposal of 2048")
            return "server limit \(limit); no proposal → \(absent); 2048 → \(small)"
        },

        ConformanceCase("hello.max-frame-bounds", clause: "5.2-4", "max_frame below 1024 is BAD_REQUEST; above 16 MiB counts as 16 MiB") { ctx throws(CaseStop) in
            try Expect.helloRefused(try ctx.connectStore(), CaseContext.hello(.device, maxFrame: 1023), .badRequest, "max_frame 1023")
            let huge = try ctx.connectStore().open(CaseContext.hello(.device, maxFrame: Int(UInt32.max)))
            try Expect.that(Int(huge.maxFrame) <= FrameLimits.ceiling, "a proposal of 2^32-1 was answered max_frame \(huge.maxFrame), over 16777216")
            return "1023 → ERROR BAD_REQUEST and close; 4294967295 → \(huge.maxFrame)"
        },

        ConformanceCase("hello.keepalive", clause: "5.2-5", "the server chooses keepalive_ms and states it in HELLO_OK") { ctx throws(CaseStop) in
            // The client's value is a preference only, so every answer is legal; what is
            // judged is that HELLO_OK always states the choice (a required field).
            var chosen: [String] = []
            for proposal: UInt32? in [nil, 0, 1_234] {
                var hello = CaseContext.hello(.device)
                hello.keepaliveMs = proposal
                let ok = try ctx.connectStore().open(hello)
                chosen.append("\(proposal.map(String.init) ?? "none") → \(ok.keepaliveMs)")
            }
            return "keepalive_ms proposals " + chosen.joined(separator: ", ")
        },

        ConformanceCase("hello.max-inflight", clause: "5.2-6", "max_inflight is 1 or more, within the client's value; 0 is BAD_REQUEST") { ctx throws(CaseStop) in
            try Expect.helloRefused(try ctx.connectStore(), CaseContext.hello(.device, maxInflight: 0), .badRequest, "max_inflight 0")
            let three = try ctx.connectStore().open(CaseContext.hello(.device, maxInflight: 3))
            try Expect.that((1...3).contains(three.maxInflight), "a proposal of 3 was answered max_inflight \(three.maxInflight)")
            let open = try ctx.connectStore().open(CaseContext.hello(.device))
            try Expect.that(open.maxInflight >= 1, "HELLO without max_inflight was answered max_inflight 0")
            return "0 → ERROR BAD_REQUEST; 3 → \(three.maxInflight); none → \(open.maxInflight)"
        },

        ConformanceCase("hello.limits-apply-after", clause: "5.2-7", "a HELLO proposing 1024 may itself be 1024 bytes; the limit binds after HELLO_OK") { ctx throws(CaseStop) in
            // Before HELLO_OK a server reads frames of up to 1024 bytes (v1.1), so the
            // HELLO is as large as that allows.
            let session = try ctx.connectStore()
            let fields = RawFrame.helloBody(extra: RawFrame.field(.maxFrame, RawFrame.bigEndian(UInt32(1024))))
            guard let padding = RawFrame.padding(toLength: 1024 - 16 - fields.count) else { throw .fail("internal: cannot pad HELLO") }
            let id = session.takeCorrelation()
            try session.sendRaw(RawFrame.frame(.hello, correlation: id, body: fields + padding), "a 1024-byte HELLO")
            let answer = try session.reply(to: id, waitingFor: "HELLO_OK")
            guard case .helloOK(let ok) = answer else { throw .fail("a 1024-byte HELLO proposing max_frame 1024 was answered \(describe(answer))") }
            try Expect.equal(ok.maxFrame, 1024, "negotiated max_frame")
            guard let fill = RawFrame.padding(toLength: 1024 - 16) else { throw .fail("internal: cannot pad PING") }
            try session.sendRaw(RawFrame.frame(.ping, correlation: 77, body: fill), "a 1024-byte PING")
            let (header, pong) = try session.next(waitingFor: "PONG to a 1024-byte PING")
            try Expect.that(pong == .pong && header.correlation == 77, "a PING of exactly max_frame was answered \(describe(pong))")
            try session.sendRaw(RawFrame.header(type: MessageType.ping.rawValue, correlation: 78, length: 1024 - 15), "a 1025-byte PING header")
            try Expect.goawayThenClose(session, .frameTooLarge, "a 1025-byte frame after max_frame 1024")
            return "1024-byte HELLO accepted; then 1024 bytes → PONG, 1025 → GOAWAY FRAME_TOO_LARGE"
        },

        ConformanceCase("hello.second-hello", clause: "5.1-4", "a second HELLO is BAD_REQUEST and changes nothing") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice(maxFrame: 2048)
            try Expect.refused(session, .hello(CaseContext.hello(.device, maxFrame: 1024)), .badRequest, "a second HELLO")
            guard let fill = RawFrame.padding(toLength: 2048 - 16) else { throw .fail("internal: cannot pad PING") }
            try session.sendRaw(RawFrame.frame(.ping, correlation: 91, body: fill), "a 2048-byte PING")
            let (header, pong) = try session.next(waitingFor: "PONG to a 2048-byte PING")
            try Expect.that(pong == .pong && header.correlation == 91, "after the refused second HELLO, a 2048-byte PING was answered \(describe(pong)); max_frame must still be 2048")
            return "second HELLO → ERROR BAD_REQUEST; max_frame still 2048"
        },

        ConformanceCase("hello.failed-closes", clause: "5.1-3", "a HELLO refused with ERROR is followed by the server closing") { ctx throws(CaseStop) in
            let session = try ctx.connectStore()
            let answer = try session.hello(CaseContext.hello(.device, maxFrame: 100))
            try Expect.error(answer, .badRequest, "HELLO with max_frame 100")
            // A PING now must find the connection closing, never a PONG.
            try? session.client.sendRaw(Message.ping.encoded(correlation: 5))
            let after = try session.expectClosed("ERROR refused HELLO")
            try Expect.that(after.isEmpty, "after refusing HELLO the server sent \(after.map(describe).joined(separator: ", "))")
            return "ERROR BAD_REQUEST, then closed; a PING sent after it got no PONG"
        },

        ConformanceCase("hello.required-ping", clause: "5.1-2", "PING before HELLO gets GOAWAY HELLO_REQUIRED") { ctx throws(CaseStop) in
            let session = try ctx.connectStore()
            try session.send(.ping)
            try Expect.goawayThenClose(session, .helloRequired, "PING as the first frame")
            return "GOAWAY HELLO_REQUIRED, closed"
        },

        ConformanceCase("hello.required-fetch", clause: "5.1-2", "FETCH before HELLO gets GOAWAY HELLO_REQUIRED") { ctx throws(CaseStop) in
            let session = try ctx.connectStore()
            try session.send(.fetch(Fetch(id: PayloadID.random(), token: nil)))
            try Expect.goawayThenClose(session, .helloRequired, "FETCH as the first frame")
            return "GOAWAY HELLO_REQUIRED, closed"
        },

        ConformanceCase("hello.required-gateway", clause: "5.1-2", "PUSH before HELLO at the gateway gets GOAWAY HELLO_REQUIRED") { ctx throws(CaseStop) in
            let session = try ctx.connectGateway()
            try session.send(.push(Push(target: .device(ctx.unique("dev")), id: [1, 2, 3])))
            try Expect.goawayThenClose(session, .helloRequired, "PUSH as the first frame")
            return "GOAWAY HELLO_REQUIRED, closed"
        },
    ]
}
