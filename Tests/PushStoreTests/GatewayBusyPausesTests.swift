import Testing
import PushEventLoop
@testable import PushStore

/// When a store with several gateway addresses sends pushes again to a gateway that
/// answered BUSY ([4.13-13]), without sockets.
@Suite("Outbox: pauses after a gateway's BUSY")
struct GatewayBusyPausesTests {
    let a = HostPort(host: "127.0.0.1", port: 7001)
    let b = HostPort(host: "127.0.0.1", port: 7002)

    @Test("the first BUSY moves on and pauses that address; the BUSYs of pushes sent before it do not move again")
    func firstBusyMovesOn() {
        var pauses = GatewayBusyPauses()
        #expect(pauses.waitMs(at: a, nowMs: 0) == 0)
        let first = pauses.busy(at: a, nowMs: 10)
        let second = pauses.busy(at: a, nowMs: 12)
        #expect(first)
        #expect(!second, "a push sent before the first BUSY")
        #expect(pauses.waitMs(at: a, nowMs: 12) == GatewayBusyPauses.firstMs - 2)
        #expect(pauses.waitMs(at: b, nowMs: 12) == 0, "the next address takes the pushes at once")
    }

    @Test("every address BUSY: each is sent to again only after its pause, which doubles up to the cap; PUSH_ACK ends it")
    func backoffWhileEveryAddressIsBusy() {
        var pauses = GatewayBusyPauses()
        var now: Int64 = 0
        var lengths: [Int64] = []
        var moves = 0
        for _ in 0..<6 {
            if pauses.busy(at: a, nowMs: now) { moves += 1 }
            lengths.append(pauses.waitMs(at: a, nowMs: now))
            if pauses.busy(at: b, nowMs: now) { moves += 1 }
            now += pauses.waitMs(at: a, nowMs: now)
        }
        #expect(moves == 12, "every BUSY after a pause moves on")
        #expect(lengths == [1_000, 2_000, 4_000, 8_000, 8_000, 8_000])
        pauses.acknowledged(at: a)
        #expect(pauses.waitMs(at: a, nowMs: now) == 0)
        let afresh = pauses.busy(at: a, nowMs: now)
        #expect(afresh)
        #expect(pauses.waitMs(at: a, nowMs: now) == GatewayBusyPauses.firstMs, "started afresh after the PUSH_ACK")
        #expect(pauses.pauses[b]?.lengthMs == GatewayBusyPauses.maxMs, "b's pause is its own")
    }
}
