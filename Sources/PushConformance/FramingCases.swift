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

        ConformanceCase("frame.default-max", clause: "2-8", "before HELLO_OK the limit is 1024 bytes") { ctx throws(CaseStop) in
            let limit = CaseContext.maxFrameBeforeHello
            let exact = try ctx.connectStore()
            let fields = RawFrame.helloBody()
            guard let padding = RawFrame.padding(toLength: limit - 16 - fields.count) else { throw .fail("internal: cannot pad HELLO") }
            try exact.sendRaw(RawFrame.frame(.hello, correlation: 1, body: fields + padding), "a \(limit)-byte HELLO")
            let (_, answer) = try exact.next(waitingFor: "HELLO_OK")
            guard case .helloOK = answer else { throw .fail("a HELLO of exactly \(limit) bytes was answered \(describe(answer))") }
            let over = try ctx.connectStore()
            // Only the header: the length alone must be refused, without waiting for the body.
            try over.sendRaw(RawFrame.header(type: MessageType.hello.rawValue, correlation: 1, length: UInt32(limit - 15)), "a \(limit + 1)-byte HELLO header")
            try Expect.goawayThenClose(over, .frameTooLarge, "a \(limit + 1)-byte first frame")
            return "\(limit)-byte HELLO → HELLO_OK; \(limit + 1) → GOAWAY FRAME_TOO_LARGE"
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
