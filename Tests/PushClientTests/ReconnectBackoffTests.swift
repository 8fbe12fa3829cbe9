import Testing
@testable import PushClient
import PushEventLoop
import PushTestSupport
import PushWire

/// SPEC.md 5.8-1..3 at the link: a server that accepts TCP and then refuses HELLO, or closes,
/// is retried with a wait that grows, against a listener of the test's own on 127.0.0.1.
@Suite("ServerLink: reconnect backoff", .ownThread, .serialized)
struct ReconnectBackoffTests {
    /// How long each case watches the link reconnect.
    static let windowSeconds = 3.0

    /// The accept times of a link to `server` over the window, which `script` answers.
    private func attempts(_ script: @escaping (ScriptedServer.Peer, Message, UInt32) -> Void,
                          onAccept: ((ScriptedServer.Peer) -> Void)? = nil) throws -> [Int64] {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let server = try ScriptedServer(loop: loop)
        defer { server.stop() }
        server.onMessage = script
        server.onAccept = onAccept
        let link = ServerLink(loop: loop, endpoint: server.endpoint) { Hello(role: .device, credential: [1, 2, 3]) }
        var downs = 0
        link.onDown = { _ in downs += 1 }
        link.start()
        loop.run(until: { false }, timeoutSeconds: Self.windowSeconds)
        link.stop()
        #expect(downs >= server.peers.count - 1, "each attempt but the last ended down")
        return server.peers.map(\.acceptedAt)
    }

    /// Each wait is at least 0.75 times its nominal value (100 ms doubling, at most 5 s), so
    /// within the window no more attempts than that series allows; and the link came back.
    private func checkBackoff(_ accepted: [Int64], _ what: String) {
        // 75 + 150 + 300 + 600 + 1200 ms: at most 6 connections in 3 s (the refused-at-once
        // defect made about 30).
        #expect(accepted.count >= 3, "\(what): the link kept trying: \(accepted.count) attempts")
        #expect(accepted.count <= 6, "\(what): \(accepted.count) attempts in \(Self.windowSeconds) s")
        let gaps = zip(accepted.dropFirst(), accepted).map { $0 - $1 }
        for (n, gap) in gaps.enumerated() {
            let nominal = min(AddressRotation.capMs, AddressRotation.baseMs << n)
            // A few ms of slack for the timer's granularity; a loaded machine only waits longer.
            #expect(gap >= nominal * 3 / 4 - 5, "\(what): wait \(n + 1) was \(gap) ms, nominal \(nominal): \(gaps)")
        }
    }

    @Test("[5.8-3] a server that accepts TCP and answers every HELLO with ERROR BUSY is retried with a growing wait")
    func helloRefusedBusy() throws {
        let accepted = try attempts { peer, message, correlation in
            if case .hello = message {
                peer.send(.error(ErrorReply(status: .busy, message: "too many connections")), correlation: correlation)
                peer.closeAfterFlush()
            }
        }
        checkBackoff(accepted, "HELLO refused BUSY")
    }

    @Test("[5.8-1] a server that closes each connection right after accepting it is retried with a growing wait")
    func closedAtAccept() throws {
        let accepted = try attempts({ _, _, _ in }, onAccept: { $0.close() })
        checkBackoff(accepted, "closed at accept")
    }

    @Test("[5.8-3] a connection that reaches HELLO_OK and closes at once ends no run of failures")
    func helloOKThenClosed() throws {
        let accepted = try attempts { peer, message, correlation in
            if ScriptedServer.answerHandshake(peer, message, correlation), case .hello = message { peer.closeAfterFlush() }
        }
        checkBackoff(accepted, "HELLO_OK then closed")
    }

    @Test("[5.8-1] [5.8-2] the waits double from 100 ms to a 5 s cap, each drawn over half its width, never over 1.5 times the cap")
    func backoffSeries() {
        var low = Backoff(baseMs: AddressRotation.baseMs, capMs: AddressRotation.capMs)
        low.random = { $0.lowerBound }
        var high = Backoff(baseMs: AddressRotation.baseMs, capMs: AddressRotation.capMs)
        high.random = { $0.upperBound }
        var lows: [Int64] = []
        var highs: [Int64] = []
        for _ in 0..<10 {
            lows.append(low.next())
            highs.append(high.next())
        }
        #expect(lows == [75, 150, 300, 600, 1_200, 2_400, 3_750, 3_750, 3_750, 3_750])
        #expect(highs == [125, 250, 500, 1_000, 2_000, 4_000, 6_250, 6_250, 6_250, 6_250])
        #expect(AddressRotation.baseMs >= 50 && (5_000...60_000).contains(AddressRotation.capMs))
        for (lo, hi) in zip(lows, highs) { #expect(hi - lo >= (lo + hi) / 2 / 2, "a range half as wide as the nominal value") }
        #expect((highs.max() ?? 0) <= AddressRotation.capMs * 3 / 2)
        // Before the cap each wait is longer than any the one before could have been.
        for n in 1..<6 { #expect(lows[n] > highs[n - 1]) }
    }
}
