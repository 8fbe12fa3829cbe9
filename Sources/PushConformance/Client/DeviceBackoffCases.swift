import PushClock
import PushWire

/// Reconnecting with backoff and jitter (5.8-1 to 5.8-3).
enum DeviceBackoffCases {
    static let all: [ClientCase] = [closedAtOnce, jitter, helloRefused, comesBack]

    /// How long the gateway refuses in the backoff cases.
    static let refusalMs: Int64 = 6_500

    /// Has the gateway refuse for `refusalMs`, then returns when each attempt began.
    static func attempts(_ h: ClientHarness, refusing refuse: (ClientHarness) -> Void) throws(CaseStop) -> [Int64] {
        try h.startLoggedIn()
        guard let device = h.gateway.device else { throw .fail("the device is not connected to the gateway") }
        refuse(h)
        let start = Clocks.monotonicMilliseconds()
        device.connection.close()
        try h.pause(refusalMs)
        return h.log.connectionTimes(.gateway).filter { $0 >= start }
    }

    static func closeAtOnce(_ h: ClientHarness) { h.gatewayServer.acceptMode = .closeAtOnce }
    static func refuseHello(_ h: ClientHarness) { h.gateway.refuseHello = .busy }

    static let closedAtOnce = ClientCase("dev.reconnect.backoff", clause: "5.8-1",
                                         "a gateway that closes every connection is retried with growing waits") { h throws(CaseStop) in
        let times = try attempts(h, refusing: closeAtOnce)
        if let problem = Backoff.problem(times, over: refusalMs) { throw .fail(problem) }
        return Backoff.summary(times)
    }

    static let helloRefused = ClientCase("dev.reconnect.hello-refused", clause: "5.8-3",
                                         "a connection whose HELLO is refused (BUSY) counts as a failed attempt: the waits still grow") { h throws(CaseStop) in
        let times = try attempts(h, refusing: refuseHello)
        if let problem = Backoff.problem(times, over: refusalMs) { throw .fail(problem + " (each connection's HELLO was answered BUSY)") }
        return Backoff.summary(times)
    }

    static let jitter = ClientCase("dev.reconnect.jitter", clause: "5.8-2",
                                   "the waits between attempts are drawn at random, not an exact series") { h throws(CaseStop) in
        let times = try attempts(h, refusing: closeAtOnce)
        let waits = Backoff.waits(times)
        guard waits.filter({ $0 >= 150 }).count >= 3 else { throw .skip("only \(times.count) attempts in \(refusalMs) ms: too few waits to judge (\(Backoff.summary(times)))") }
        if Backoff.looksExact(waits) { throw .fail("the waits follow an exact series: \(waits.map(String.init).joined(separator: ", ")) ms") }
        return Backoff.summary(times)
    }

    /// The longest any wait of 5.8-1 may be: 1.5 times the largest cap the clause allows.
    static let longestWaitMs: Int64 = 90_000

    static let comesBack = ClientCase("dev.reconnect.comes-back", clause: "5.8-1",
                                      "after 3 s of refusals the gateway accepts again, and the device comes back (within 90 s, 1.5 x the largest cap)") { h throws(CaseStop) in
        try h.startLoggedIn()
        guard let device = h.gateway.device else { throw .fail("the device is not connected to the gateway") }
        h.gatewayServer.acceptMode = .closeAtOnce
        device.connection.close()
        try h.pause(3_000)
        h.gatewayServer.acceptMode = .serve
        let back = Clocks.monotonicMilliseconds()
        try h.wait("the device did not connect again after the gateway came back", timeoutMs: longestWaitMs) {
            h.gateway.device != nil
        }
        let (id, _) = h.commitPayload()
        try h.pushAndWaitShown(id)
        return "back \(Clocks.monotonicMilliseconds() - back) ms after the gateway was"
    }
}

/// Judging a run of connection attempts against 5.8-1 and 5.8-2.
enum Backoff {
    static func waits(_ times: [Int64]) -> [Int64] { zip(times, times.dropFirst()).map { $1 - $0 } }

    static func summary(_ times: [Int64]) -> String {
        "\(times.count) attempts, waits " + waits(times).map { "\($0)" }.joined(separator: ", ") + " ms"
    }

    /// A sentence about how `times` break 5.8-1 over a refusal of `windowMs`, or nil. The
    /// n-th wait (from 1) must be at least half of min(5000, 50 · 2^(n-1)) (checked as 0.4 of
    /// it less 50 ms, for the harness's own lateness); and a client must try at least twice.
    static func problem(_ times: [Int64], over windowMs: Int64) -> String? {
        guard times.count >= 2 else { return "only \(times.count) attempt in \(windowMs) ms of refusals: the device does not come back" }
        for (index, wait) in waits(times).enumerated() {
            let nominal = min(5_000, 50 << min(index, 20))
            // The harness logs an attempt when its loop gets to it: on a loaded machine one
            // logged late makes the next wait look short, so the bound keeps room for that.
            if wait < Int64(nominal) * 2 / 5 - 50 {
                return "wait \(index + 1) was \(wait) ms, well under half of \(nominal) ms: \(summary(times))"
            }
        }
        // Growth, from the second wait on: the first also holds how late the client noticed
        // the close, which a loaded machine stretches. By the fifth wait the nominal one has
        // grown eightfold over the second, so even at the jitter's extremes it is twice as long.
        let spread = waits(times)
        if spread.count >= 5, spread[4...].max() ?? 0 < 2 * spread[1], spread[1] < 2_500 {
            return "the waits do not grow: \(summary(times))"
        }
        return nil
    }

    /// Whether the waits look computed rather than drawn: equal, or each twice the one
    /// before, within the timers' error. Waits under 150 ms are left out: a 4 ms timer tick
    /// is too large a part of them.
    static func looksExact(_ waits: [Int64]) -> Bool {
        let long = waits.filter { $0 >= 150 }
        let ratios = zip(long, long.dropFirst()).map { Double($0.1) / Double($0.0) }
        guard ratios.count >= 2 else { return false }
        return ratios.allSatisfy { abs($0 - 2) <= 0.04 || abs($0 - 1) <= 0.03 }
    }
}
