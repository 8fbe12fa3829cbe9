import PushClock
import PushSecurity
import PushSession
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

        ConformanceCase("hello.limits-apply-after", clause: "5.2-7", "max_frame agreed in HELLO_OK replaces the 1024 bytes of the handshake once HELLO_OK is sent") { ctx throws(CaseStop) in
            let session = try ctx.connectStore()
            let ok = try session.open(CaseContext.hello(.device, maxFrame: 4096))
            let size = Int(ok.maxFrame)
            try Expect.that(size <= 4096, "a proposal of 4096 was answered max_frame \(size) [5.2-3]")
            guard size > FrameLimits.floor else { throw .skip("the store's own limit is \(size) bytes: no room above the handshake's 1024") }
            guard let fill = RawFrame.padding(toLength: size - 16) else { throw .fail("internal: cannot pad PING") }
            try session.sendRaw(RawFrame.frame(.ping, correlation: 77, body: fill), "a \(size)-byte PING")
            let (header, pong) = try session.next(waitingFor: "PONG to a \(size)-byte PING")
            try Expect.that(pong == .pong && header.correlation == 77, "a PING of exactly max_frame was answered \(describe(pong))")
            try session.sendRaw(RawFrame.header(type: MessageType.ping.rawValue, correlation: 78, length: UInt32(size - 15)), "a \(size + 1)-byte PING header")
            try Expect.goawayThenClose(session, .frameTooLarge, "a \(size + 1)-byte frame after max_frame \(size)")
            return "after HELLO_OK with max_frame \(size): \(size) bytes → PONG, \(size + 1) → GOAWAY FRAME_TOO_LARGE"
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

        ConformanceCase("hello.required-not-processed", clause: "4.4-4", "GOAWAY HELLO_REQUIRED for a first frame carries last_correlation 0") { ctx throws(CaseStop) in
            let session = try ctx.connectStore()
            try session.send(.ping, correlation: 7)
            let goaway = try Expect.goawayThenClose(session, .helloRequired, "PING 7 as the first frame")
            try Expect.equal(goaway.lastCorrelation, 0, "last_correlation after refusing request 7 before HELLO")
            return "PING 7 first → GOAWAY HELLO_REQUIRED last_correlation 0"
        },

        ConformanceCase("hello.required-any-type", clause: "5.1-5", "before HELLO_OK an unknown type or a reply is HELLO_REQUIRED, not UNKNOWN_TYPE") { ctx throws(CaseStop) in
            let unknown = try ctx.connectStore()
            try unknown.sendRaw(RawFrame.frame(type: 0x7E, correlation: 9, body: [0xFF, 0x00]), "a frame of unknown type 0x7e")
            let first = try Expect.goawayThenClose(unknown, .helloRequired, "a frame of unknown type as the first frame")
            try Expect.equal(first.lastCorrelation, 0, "last_correlation after an unknown type before HELLO")
            let reply = try ctx.connectStore()
            try reply.send(.pong, correlation: 4)
            try Expect.goawayThenClose(reply, .helloRequired, "PONG as the first frame")
            return "type 0x7e first and PONG first → GOAWAY HELLO_REQUIRED, closed"
        },

        ConformanceCase("hello.handshake-deadline", clause: "5.1-6", "a HELLO still unfinished at the handshake deadline gets GOAWAY TIMEOUT, however bytes trickle in") { ctx throws(CaseStop) in
            let deadline = ctx.options.handshakeDeadlineMs
            let limit = deadline + ctx.options.timerSlackMs
            guard limit <= 8_000 || ctx.options.slow else { throw .skip("a handshake deadline of \(deadline) ms: waiting for it needs --slow") }
            // --frame-deadline-ms names the gateway's when the frame deadline case can use
            // the gateway; the store's is then the spec's default.
            let useStore = ctx.options.store != nil
            let frameDeadline = useStore && ctx.options.gateway != nil && ctx.options.keys != nil ? 10_000 : ctx.options.frameDeadlineMs
            guard frameDeadline > limit else {
                throw .skip("the frame deadline (\(frameDeadline) ms) would cut a trickled HELLO before the handshake deadline")
            }
            let session = try useStore ? ctx.connectStore() : ctx.connectGateway()
            session.answersPings = false
            let hello = FramingCases.helloBytes()
            let started = Clocks.monotonicMilliseconds()
            var sent = 0
            // A byte every 250 ms keeps any silence timer quiet; the last byte is never sent.
            while true {
                let elapsed = Clocks.monotonicMilliseconds() - started
                guard elapsed <= limit else {
                    throw .fail("no GOAWAY TIMEOUT \(elapsed) ms into a trickled HELLO (\(sent) of \(hello.count) bytes); the handshake deadline is \(deadline) ms")
                }
                if let frame = try session.pollFrame(timeoutMs: 250, showPings: true, waitingFor: "GOAWAY TIMEOUT at the handshake deadline") {
                    let at = Clocks.monotonicMilliseconds() - started
                    let message = try session.decode(frame, "GOAWAY TIMEOUT")
                    guard case .goaway(let goaway) = message, goaway.status == .timeout else {
                        throw .fail("a HELLO trickled for \(at) ms was answered \(describe(message)), expected GOAWAY TIMEOUT")
                    }
                    try Expect.that(at >= deadline - 100, "GOAWAY TIMEOUT after \(at) ms, before the \(deadline) ms deadline [5.4-6]")
                    try Expect.equal(goaway.lastCorrelation, 0, "last_correlation of a handshake that never completed [4.4-4]")
                    let after = try session.expectClosed("GOAWAY TIMEOUT")
                    try Expect.that(after.isEmpty, "after GOAWAY TIMEOUT the server sent \(after.map(describe).joined(separator: ", "))")
                    return "\(sent) HELLO bytes over \(at) ms → GOAWAY TIMEOUT last_correlation 0, closed (deadline \(deadline) ms)"
                }
                if sent < hello.count - 1 {
                    // The server may close between two bytes; its GOAWAY is read on the next turn.
                    try? session.client.sendRaw([hello[sent]])
                    sent += 1
                }
            }
        },

        ConformanceCase("hello.size-before-hello-ok", clause: "5.1-7", "before HELLO_OK a 1024-byte HELLO is served and a 1025-byte frame is FRAME_TOO_LARGE") { ctx throws(CaseStop) in
            let exact = try ctx.connectStore()
            let fields = RawFrame.helloBody()
            guard let padding = RawFrame.padding(toLength: FrameLimits.floor - 16 - fields.count) else { throw .fail("internal: cannot pad HELLO") }
            try exact.sendRaw(RawFrame.frame(.hello, correlation: 1, body: fields + padding), "a 1024-byte HELLO")
            let (_, answer) = try exact.next(waitingFor: "HELLO_OK")
            guard case .helloOK = answer else { throw .fail("a HELLO of exactly 1024 bytes was answered \(describe(answer))") }
            let over = try ctx.connectStore()
            // The header alone: the verdict must not wait for a body ([2-7]).
            try over.sendRaw(RawFrame.header(type: MessageType.hello.rawValue, correlation: 1, length: UInt32(FrameLimits.floor - 15)), "a 1025-byte HELLO header")
            let goaway = try Expect.goawayThenClose(over, .frameTooLarge, "a 1025-byte first frame")
            try Expect.equal(goaway.lastCorrelation, 0, "last_correlation before HELLO_OK")
            return "1024-byte HELLO → HELLO_OK; 1025-byte header → GOAWAY FRAME_TOO_LARGE last_correlation 0, closed"
        },
    ]
}
