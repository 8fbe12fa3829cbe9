import PushClock
import PushSession
import PushWire

/// Keepalive (section 5.4). These wait a keepalive interval or 45 s, so they SKIP
/// without --slow unless the service's keepalive is short.
enum KeepaliveCases {
    /// The session used for the keepalive cases, or SKIP when waiting for its keepalive
    /// would take too long without `--slow`.
    static func keepaliveSession(_ ctx: CaseContext, factor: Double) throws(CaseStop) -> (WireSession, Int64) {
        let session: WireSession
        let ok: HelloOK
        if ctx.options.store != nil {
            session = try ctx.connectStore()
            ok = try session.open(CaseContext.hello(.device))
        } else {
            session = try ctx.connectGateway()
            ok = try session.open(CaseContext.hello(.device, credential: try ctx.registration(device: ctx.unique("dev"), user: ctx.unique("user"))))
        }
        let keepalive = Int64(ok.keepaliveMs)
        guard keepalive > 0 else { throw .skip("the \(session.name) turned keepalive off (keepalive_ms 0)") }
        let wait = Int64(Double(keepalive) * factor)
        guard wait <= 8_000 || ctx.options.slow else { throw .skip("keepalive_ms \(keepalive): waiting \(wait / 1000) s needs --slow") }
        guard wait <= 300_000 else { throw .skip("keepalive_ms \(keepalive) is too long to wait for") }
        session.answersPings = false
        return (session, keepalive)
    }

    static let all: [ConformanceCase] = [
        ConformanceCase("conn.keepalive-ping", clause: "5.4-1", "a server that has sent nothing for keepalive_ms sends PING") { ctx throws(CaseStop) in
            let (session, keepalive) = try keepaliveSession(ctx, factor: 1.0)
            let started = Clocks.monotonicMilliseconds()
            let frame = try session.nextFrame(timeoutMs: Int32(keepalive + keepalive / 4 + 1_000), showPings: true,
                                              waitingFor: "a keepalive PING within \(keepalive) ms")
            let elapsed = Clocks.monotonicMilliseconds() - started
            try Expect.that(frame.header.type == .ping, "a silent connection got \(frame.header.type?.specName ?? "an unknown frame"), expected PING")
            try session.sendRaw(Message.pong.encoded(correlation: frame.header.correlation), "PONG")
            return "keepalive_ms \(keepalive): PING after \(elapsed) ms"
        },

        ConformanceCase("conn.keepalive-timeout", clause: "5.4-2", "a peer silent for 1.5 x keepalive gets GOAWAY TIMEOUT and is closed") { ctx throws(CaseStop) in
            let (session, keepalive) = try keepaliveSession(ctx, factor: 1.5)
            let started = Clocks.monotonicMilliseconds()
            let limit = keepalive * 3 / 2 + max(2_000, keepalive / 2)
            while true {
                // The server's PINGs are seen and deliberately left unanswered.
                let remaining = started + limit - Clocks.monotonicMilliseconds()
                guard remaining > 0 else { throw .fail("no GOAWAY TIMEOUT within \(limit) ms of silence (keepalive_ms \(keepalive))") }
                let frame = try session.nextFrame(timeoutMs: Int32(remaining), showPings: true, waitingFor: "GOAWAY TIMEOUT")
                if frame.header.type == .ping { continue }
                let message = try session.decode(frame, "GOAWAY TIMEOUT")
                guard case .goaway(let goaway) = message, goaway.status == .timeout else { throw .fail("a silent client got \(describe(message)), expected GOAWAY TIMEOUT") }
                break
            }
            let elapsed = Clocks.monotonicMilliseconds() - started
            try Expect.that(elapsed >= keepalive, "GOAWAY TIMEOUT came after \(elapsed) ms, before even one keepalive interval (\(keepalive) ms)")
            let after = try session.expectClosed("GOAWAY TIMEOUT")
            try Expect.that(after.isEmpty, "after GOAWAY TIMEOUT the server sent \(after.map(describe).joined(separator: ", "))")
            return "keepalive_ms \(keepalive): GOAWAY TIMEOUT after \(elapsed) ms, closed"
        },

        ConformanceCase("conn.idle-before-hello", clause: "5.4-3", "a client that sends nothing is closed within 45 s") { ctx throws(CaseStop) in
            guard ctx.options.slow else { throw .skip("waits 45 s; run with --slow") }
            let session: WireSession
            if ctx.options.store != nil { session = try ctx.connectStore() } else { session = try ctx.connectGateway() }
            let started = Clocks.monotonicMilliseconds()
            let (_, message) = try session.next(timeoutMs: 60_000, waitingFor: "GOAWAY TIMEOUT within 45 s")
            let elapsed = Clocks.monotonicMilliseconds() - started
            guard case .goaway(let goaway) = message, goaway.status == .timeout else { throw .fail("an idle connection got \(describe(message)), expected GOAWAY TIMEOUT") }
            // The handshake deadline ([5.1-6]) may close it well before 45 s.
            try Expect.that(elapsed <= 45_000 + ctx.options.timerSlackMs, "GOAWAY TIMEOUT came after \(elapsed) ms, later than 45 s")
            _ = try session.expectClosed("GOAWAY TIMEOUT")
            return "GOAWAY TIMEOUT after \(elapsed) ms, closed"
        },

        ConformanceCase("conn.frame-deadline", clause: "5.4-5", "a frame still unfinished at the frame deadline gets GOAWAY TIMEOUT, however bytes trickle in") { ctx throws(CaseStop) in
            let deadline = ctx.options.frameDeadlineMs
            let limit = deadline + ctx.options.timerSlackMs
            guard limit <= 8_000 || ctx.options.slow else { throw .skip("a frame deadline of \(deadline) ms: waiting for it needs --slow") }
            let session = try ctx.options.gateway != nil && ctx.options.keys != nil ? ctx.gatewayProvider() : ctx.storeDevice()
            // A PONG now would land inside the unfinished frame.
            session.answersPings = false
            try session.expectAlive("HELLO_OK")
            guard let fill = RawFrame.padding(toLength: 200) else { throw .fail("internal: cannot pad PING") }
            let frame = RawFrame.frame(.ping, correlation: 21, body: fill)
            let started = Clocks.monotonicMilliseconds()
            var sent = 0
            // A byte every 250 ms keeps the keepalive silence away; the last byte never goes.
            while true {
                let elapsed = Clocks.monotonicMilliseconds() - started
                guard elapsed <= limit else {
                    throw .fail("no GOAWAY TIMEOUT \(elapsed) ms into a trickled frame (\(sent) of \(frame.count) bytes); the frame deadline is \(deadline) ms")
                }
                if let got = try session.pollFrame(timeoutMs: 250, waitingFor: "GOAWAY TIMEOUT at the frame deadline") {
                    let at = Clocks.monotonicMilliseconds() - started
                    let message = try session.decode(got, "GOAWAY TIMEOUT")
                    guard case .goaway(let goaway) = message, goaway.status == .timeout else {
                        throw .fail("a frame trickled for \(at) ms was answered \(describe(message)), expected GOAWAY TIMEOUT")
                    }
                    try Expect.that(at >= deadline - 100, "GOAWAY TIMEOUT after \(at) ms, before the \(deadline) ms deadline [5.4-6]")
                    let after = try session.expectClosed("GOAWAY TIMEOUT")
                    try Expect.that(after.isEmpty, "after GOAWAY TIMEOUT the server sent \(after.map(describe).joined(separator: ", "))")
                    return "\(sent) of \(frame.count) bytes over \(at) ms → GOAWAY TIMEOUT, closed (deadline \(deadline) ms)"
                }
                if sent < frame.count - 1 {
                    try? session.client.sendRaw([frame[sent]])
                    sent += 1
                }
            }
        },
    ]
}
