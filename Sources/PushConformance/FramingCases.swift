import PushWire

/// Framing over a real stream (section 2): frames split at awkward offsets, one byte at a
/// time, back to back, oversized, and correlation ids.
enum FramingCases {
    /// A device HELLO for the store, as bytes.
    static func helloBytes(correlation: UInt32 = 1) -> [UInt8] {
        Message.hello(CaseContext.hello(.device)).encoded(correlation: correlation)
    }

    /// Sends a HELLO in pieces and requires HELLO_OK, then PONG to a PING.
    static func splitHello(_ ctx: CaseContext, sizes: [Int], label: String) throws(CaseStop) -> String {
        let session = try ctx.connectStore()
        let bytes = helloBytes()
        try session.sendChunked(bytes, sizes: sizes)
        let (header, answer) = try session.next(waitingFor: "HELLO_OK to a HELLO sent in \(label)")
        guard case .helloOK = answer, header.correlation == 1 else { throw .fail("a HELLO sent in \(label) was answered \(describe(answer))") }
        try session.expectAlive("a HELLO sent in \(label)")
        return "\(bytes.count)-byte HELLO in \(label) → HELLO_OK, then PONG"
    }

    static let all: [ConformanceCase] = [
        ConformanceCase("frame.back-to-back", clause: "2-1", "frames follow each other with nothing between them") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            let ids: [UInt32] = [11, 12, 13]
            try session.sendRaw(ids.flatMap { Message.ping.encoded(correlation: $0) }, "three PINGs in one write")
            for id in ids {
                let (header, message) = try session.next(waitingFor: "PONG \(id)")
                try Expect.that(message == .pong && header.correlation == id, "expected PONG \(id), got \(describe(message)) \(header.correlation)")
            }
            return "three PINGs in one segment → PONG 11, 12, 13"
        },

        ConformanceCase("frame.split-1-byte", clause: "2-12", "a HELLO sent in 1-byte pieces") { ctx throws(CaseStop) in
            try splitHello(ctx, sizes: [1], label: "1-byte pieces")
        },

        ConformanceCase("frame.split-3-byte", clause: "2-12", "a HELLO sent in 3-byte pieces") { ctx throws(CaseStop) in
            try splitHello(ctx, sizes: [3], label: "3-byte pieces")
        },

        ConformanceCase("frame.split-header", clause: "2-12", "no decision before the 16 header bytes and the whole body are in") { ctx throws(CaseStop) in
            let session = try ctx.connectStore()
            let bytes = helloBytes()
            session.answersPings = false
            // 15 header bytes, then the 16th with part of the body, then the rest.
            try session.sendRaw(Array(bytes[..<15]), "15 header bytes")
            try session.expectSilence(ms: ctx.quietMs, "15 of 16 header bytes")
            try session.sendRaw(Array(bytes[15..<18]), "the last header byte and 2 body bytes")
            try session.expectSilence(ms: ctx.quietMs, "a header and part of its body")
            try session.sendRaw(Array(bytes[18...]), "the rest of the body")
            let (_, answer) = try session.next(waitingFor: "HELLO_OK")
            guard case .helloOK = answer else { throw .fail("a HELLO split inside its header was answered \(describe(answer))") }
            try session.expectAlive("a split HELLO")
            return "silent after 15 header bytes and after a partial body; HELLO_OK once complete"
        },

        ConformanceCase("frame.byte-at-a-time", clause: "2-12", "a client that sends every byte on its own") { ctx throws(CaseStop) in
            let session = try ctx.connectStore()
            let fetch = Message.fetch(Fetch(id: PayloadID.random(), token: nil)).encoded(correlation: 3)
            let bytes = helloBytes() + Message.ping.encoded(correlation: 2) + fetch
            // HELLO first on its own: nothing else may be sent before HELLO_OK ([5.1-1]).
            let helloLength = helloBytes().count
            try session.sendChunked(Array(bytes[..<helloLength]), sizes: [1], pauseMs: 1)
            let (_, hello) = try session.next(waitingFor: "HELLO_OK")
            guard case .helloOK = hello else { throw .fail("a byte-at-a-time HELLO was answered \(describe(hello))") }
            try session.sendChunked(Array(bytes[helloLength...]), sizes: [1], pauseMs: 1)
            let (pongHeader, pong) = try session.next(waitingFor: "PONG 2")
            try Expect.that(pong == .pong && pongHeader.correlation == 2, "a byte-at-a-time PING was answered \(describe(pong))")
            let (errorHeader, error) = try session.next(waitingFor: "ERROR AUTH_REQUIRED 3")
            try Expect.error(error, .authRequired, "a byte-at-a-time FETCH without token")
            try Expect.equal(errorHeader.correlation, 3, "ERROR correlation")
            return "\(bytes.count) bytes one at a time → HELLO_OK, PONG, ERROR AUTH_REQUIRED"
        },

        ConformanceCase("frame.length-ffffffff", clause: "2-7", "a length of 0xFFFFFFFF is FRAME_TOO_LARGE from the header alone") { ctx throws(CaseStop) in
            let session = try ctx.connectStore()
            // No body follows: the verdict must come from the header, without waiting.
            try session.sendRaw(RawFrame.header(type: MessageType.hello.rawValue, correlation: 1, length: UInt32.max), "a header with length 0xFFFFFFFF")
            try Expect.goawayThenClose(session, .frameTooLarge, "length 0xFFFFFFFF as the first frame")
            return "GOAWAY FRAME_TOO_LARGE without any body sent, closed"
        },

        ConformanceCase("frame.default-max", clause: "2-8", "after HELLO_OK without a proposal the limit is 65536 (or the server's lower own limit)") { ctx throws(CaseStop) in
            // Before HELLO_OK the server's limit is 1024 bytes, judged by hello.size-before-hello-ok.
            let session = try ctx.connectStore()
            let ok = try session.open(CaseContext.hello(.device))
            let size = Int(ok.maxFrame)
            try Expect.that((FrameLimits.floor...FrameLimits.defaultMaxFrame).contains(size), "HELLO without max_frame was answered max_frame \(size), outside 1024...65536")
            guard let fill = RawFrame.padding(toLength: size - 16) else { throw .fail("internal: cannot pad PING") }
            try session.sendRaw(RawFrame.frame(.ping, correlation: 5, body: fill), "a \(size)-byte PING")
            let (header, pong) = try session.next(waitingFor: "PONG to a \(size)-byte PING")
            try Expect.that(pong == .pong && header.correlation == 5, "a PING of exactly max_frame was answered \(describe(pong))")
            try session.sendRaw(RawFrame.header(type: MessageType.ping.rawValue, correlation: 6, length: UInt32(size - 15)), "a \(size + 1)-byte PING header")
            try Expect.goawayThenClose(session, .frameTooLarge, "a \(size + 1)-byte frame")
            return "max_frame \(size): \(size)-byte PING → PONG; \(size + 1) → GOAWAY FRAME_TOO_LARGE"
        },

        ConformanceCase("frame.correlation-echo", clause: "2-9", "replies carry the request's correlation id, any u32") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            for id: UInt32 in [0xFFFF_FFFF, 0x8000_0000, 12_345] {
                try session.send(.ping, correlation: id)
                let (header, message) = try session.next(waitingFor: "PONG \(id)")
                try Expect.that(message == .pong && header.correlation == id, "PING \(id) was answered \(describe(message)) with correlation \(header.correlation)")
            }
            let id: UInt32 = 0xFFFF_FFFE
            try session.send(.fetch(Fetch(id: PayloadID.random(), token: nil)), correlation: id)
            let (header, message) = try session.next(waitingFor: "ERROR \(id)")
            try Expect.error(message, .authRequired, "FETCH without token")
            try Expect.equal(header.correlation, id, "ERROR correlation")
            return "PONGs echo 4294967295, 2147483648, 12345; ERROR echoes 4294967294"
        },
    ]
}

extension CaseContext {
    /// The largest frame (header included) a server reads before HELLO_OK (protocol v1.1).
    static let maxFrameBeforeHello = 1_024
}
