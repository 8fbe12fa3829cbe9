import PushWire

/// TLS ([1-4]): run with --ca-file, every case goes through TLS; this one checks the
/// framing itself across TLS records.
enum TLSCases {
    static let all: [ConformanceCase] = [
        ConformanceCase("tls.same-framing", clause: "1-4", "inside TLS, frames split and join across records as over TCP, and a fault still ends in GOAWAY") { ctx throws(CaseStop) in
            guard ctx.options.tls != nil else { throw .skip("needs --ca-file: services that serve TLS") }
            let session: WireSession
            if ctx.options.store != nil {
                session = try ctx.storeDevice()
            } else if ctx.options.gateway != nil, ctx.options.keys != nil {
                session = try ctx.gatewayProvider()
            } else {
                throw .skip("needs --store, or --gateway with --data-dir")
            }
            try session.sendRaw(Message.ping.encoded(correlation: 31) + Message.ping.encoded(correlation: 32), "two PINGs in one write")
            let answers = try session.answers(to: [31, 32], "two PINGs in one TLS record")
            try Expect.that(answers.values.allSatisfy { $0 == .pong }, "two PINGs were answered \(answers.values.map(describe))")
            try session.sendChunked(Message.ping.encoded(correlation: 33), sizes: [1, 5, 3])
            let pong = try session.reply(to: 33, waitingFor: "PONG to a PING split over four TLS records")
            try Expect.that(pong == .pong, "a PING split over records was answered \(describe(pong))")
            var badMagic = Message.ping.encoded(correlation: 34)
            badMagic[0] = 0xA8
            try session.sendRaw(badMagic, "a PING with a bad magic byte")
            try Expect.goawayThenClose(session, .malformedFrame, "a bad magic byte inside TLS")
            return "\(session.name): PINGs joined and split across TLS records answered; bad magic → GOAWAY MALFORMED_FRAME, closed"
        },
    ]
}
