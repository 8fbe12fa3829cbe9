@testable import PushStore
@testable import PushStoreLogic
import Testing

/// The one rule for windows of refused tokens ([8-9]), by which a store counts a failure
/// and a database shared by stores merges their batches (`FailureWindow.merged`).
@Suite("The failure window rule ([8-9])")
struct FailureWindowRuleTests {
    static let window: UInt64 = 10_000

    private func merged(_ first: FailureWindow?, _ second: FailureWindow?, at nowMs: UInt64) -> FailureWindow? {
        FailureWindow.merged(first, second, nowMs: nowMs, windowMs: Self.window)
    }

    @Test("[8-9] two windows open now are one, from the earlier start, in either order")
    func openWindowsAddUp() {
        let early = FailureWindow(startMs: 1_000, failures: 15), late = FailureWindow(startMs: 6_000, failures: 5)
        #expect(merged(early, late, at: 6_100) == FailureWindow(startMs: 1_000, failures: 20))
        #expect(merged(late, early, at: 6_100) == FailureWindow(startMs: 1_000, failures: 20))
    }

    @Test("[8-9] a window that has ended counts for nothing: the open one is kept, a window later starts anew")
    func endedWindowsDrop() {
        let ended = FailureWindow(startMs: 1_000, failures: 20), fresh = FailureWindow(startMs: 11_000, failures: 1)
        #expect(merged(ended, fresh, at: 11_000) == fresh)
        #expect(merged(fresh, ended, at: 11_000) == fresh, "a stale batch changes nothing")
        #expect(merged(ended, nil, at: 11_000) == nil)
        #expect(merged(ended, FailureWindow(startMs: 900, failures: 1), at: 11_000) == nil, "neither open: nothing to keep")
    }

    @Test("[8-9] the last millisecond of a window still counts, the next does not")
    func windowEdges() {
        let window = FailureWindow(startMs: 1_000, failures: 3)
        #expect(merged(window, nil, at: 10_999) == window)
        #expect(merged(window, nil, at: 11_000) == nil)
        #expect(FailureWindow.earliestOpenStart(nowMs: 10_999, windowMs: Self.window) == 1_000)
    }

    @Test("[8-9] a clock stepped back before a window's start ends that window: the next failure starts a new one")
    func clockSteppedBack() {
        var limiter = FailureWindowLimiter(limit: 2, windowMs: Self.window)
        limiter.recordFailure("10.0.0.1", nowMs: 50_000)
        limiter.recordFailure("10.0.0.1", nowMs: 50_001)
        #expect(limiter.isLimited("10.0.0.1", nowMs: 50_002))
        limiter.recordFailure("10.0.0.1", nowMs: 40_000)
        #expect(limiter.isLimited("10.0.0.1", nowMs: 40_000) == false, "one failure in the new window")
        limiter.recordFailure("10.0.0.1", nowMs: 40_001)
        #expect(limiter.isLimited("10.0.0.1", nowMs: 40_001))
    }

    @Test("[8-9] a store's batch for the database is its windows per address, counted by the rule, taken once")
    func batches() {
        var batch = FailureWindowLimiter(limit: 20, windowMs: Self.window)
        for offset: UInt64 in [0, 10, 20] { batch.recordFailure("10.0.0.1", nowMs: 1_000 + offset) }
        batch.recordFailure("10.0.0.2", nowMs: 1_005)
        let taken = batch.takeWindows().sorted { $0.key < $1.key }
        #expect(taken == [KeyedFailureWindow(key: "10.0.0.1", window: FailureWindow(startMs: 1_000, failures: 3)),
                          KeyedFailureWindow(key: "10.0.0.2", window: FailureWindow(startMs: 1_005, failures: 1))])
        #expect(batch.takeWindows().isEmpty)
    }
}
