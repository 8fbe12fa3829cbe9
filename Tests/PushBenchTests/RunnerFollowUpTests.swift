import PushEventLoop
import Testing
@testable import PushBench

/// e2e's read receipts: follow-up requests an operation leaves once it is complete.
@Suite("Runner: follow-ups of completed operations")
struct RunnerFollowUpTests {
    /// Issues every operation it is asked for and remembers its slot.
    private final class RecordingWorkload: Workload {
        var slots: [Int] = []
        func issue(token: UInt32, slot: Int) -> Bool {
            slots.append(slot)
            return true
        }
    }

    private func runner(count: Int) throws -> (Runner, RecordingWorkload, EventLoop) {
        let shape = LoadShape(connections: 1, devices: 1, inflight: count, rate: nil, stop: .count(count), payloadSize: 16,
                              warmupSeconds: 0)
        let runner = Runner(shape: shape)
        let workload = RecordingWorkload()
        runner.workload = workload
        let loop = try EventLoop()
        try runner.start(loop: loop)
        return (runner, workload, loop)
    }

    @Test("the run is not over while a follow-up is unanswered, and a measured follow-up answered last ends the window")
    func followUpsHoldTheEndAndExtendTheWindow() throws {
        let (runner, workload, loop) = try runner(count: 2)
        defer { loop.shutdown() }
        #expect(workload.slots.count == 2)
        let start = runner.startTime(slot: workload.slots[0])
        runner.followUpSent()
        runner.complete(slot: workload.slots[0], end: start + 1_000_000)
        runner.followUpSent()
        runner.complete(slot: workload.slots[1], end: start + 2_000_000)
        runner.heartbeat()
        // Every operation is complete, but two receipts are out.
        #expect(!runner.isFinished)
        runner.followUpAnswered(measured: true, end: start + 3_000_000)
        #expect(!runner.isFinished)
        runner.followUpAnswered(measured: true, end: start + 5_000_000, failure: "ACK NOT_FOUND")
        #expect(runner.isFinished)
        #expect(runner.errors == ["ACK NOT_FOUND": 1])
        #expect(abs(runner.measuredSeconds - Double(start + 5_000_000 - runner.measureStart) / 1e9) < 1e-9)
    }

    @Test("an unmeasured follow-up answered last does not stretch the measured window")
    func unmeasuredFollowUpLeavesTheWindow() throws {
        let (runner, workload, loop) = try runner(count: 1)
        defer { loop.shutdown() }
        let start = runner.startTime(slot: workload.slots[0])
        runner.followUpSent()
        runner.complete(slot: workload.slots[0], end: start + 1_000_000)
        runner.followUpAnswered(measured: false, end: start + 9_000_000)
        #expect(runner.isFinished)
        #expect(abs(runner.measuredSeconds - Double(start + 1_000_000 - runner.measureStart) / 1e9) < 1e-9)
    }

    @Test("a lost connection counts the unanswered follow-ups as lost, and the run ends")
    func abortCountsFollowUps() throws {
        let (runner, workload, loop) = try runner(count: 1)
        defer { loop.shutdown() }
        runner.followUpSent()
        runner.complete(slot: workload.slots[0], end: runner.startTime(slot: workload.slots[0]) + 1_000)
        runner.abort(reason: "device connection lost")
        #expect(runner.isFinished)
        #expect(runner.errors["lost"] == 1)
    }
}
