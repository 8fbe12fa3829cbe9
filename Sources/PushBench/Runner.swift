import Histogram
import PushClock
import PushEventLoop
import PushSession

/// What a scenario does with one operation: send its first request.
protocol Workload: AnyObject {
    /// Starts operation `token` (its slot in the op table is `slot`). Returns false when
    /// no connection has room for it right now; the runner then tries again later.
    func issue(token: UInt32, slot: Int) -> Bool
}

/// Drives a workload at the load shape's pace and measures it: closed loop (a fixed
/// number of operations in flight, a new one started as one finishes) or open loop (a
/// fixed rate, each latency measured from the operation's intended start so that
/// coordinated omission does not hide a stall). Loop-confined.
final class Runner {
    let shape: LoadShape
    /// Read for every request and reply (`ops.slot(of:)`), with no dynamic exclusivity
    /// check (the runner is loop-confined): without it a push pays at least five, 310
    /// instructions of the bench's 3.6k, 8.6 % (measured as `BenchLink.session` is).
    @exclusivity(unchecked) private(set) var ops: OpTable
    var workload: Workload?
    private(set) var histogram = makeLatencyHistogram()
    private(set) var errors: [String: UInt64] = [:]
    /// Extra figures for the report (CPU use while measured).
    var extras: [(String, Double)] = []
    /// Devices one operation delivers to (a fan-out's tag size), for the CPU per delivery.
    var deliveriesPerOperation = 1
    /// Operations completed (any phase) and measured operations completed.
    private(set) var completedAll: UInt64 = 0
    private(set) var completedMeasured: UInt64 = 0
    /// Requests a completed operation left in flight (e2e's read receipts): the run is not
    /// over until they are answered, and a measured one's answer ends the measured window
    /// if it comes last.
    private(set) var followUps = 0

    private var startNanos: UInt64 = 0
    private(set) var measureStart: UInt64 = 0
    private var measureEnd: UInt64 = .max
    private var issuedMeasured = 0
    private var lastMeasuredEnd: UInt64 = 0
    private(set) var stopIssuing = false
    private var drainDeadline: UInt64 = .max
    private(set) var aborted = false
    private let closedTarget: Int
    private var started = false

    // Open loop.
    private var intervalNanos = 0.0
    private var nextIndex: UInt64 = 0
    private var backlogged = false
    private var pacer: Pacer?

    /// How long outstanding operations may take to finish once issuing stops.
    static let drainSeconds = 10.0

    init(shape: LoadShape) {
        self.shape = shape
        closedTarget = shape.connections * shape.inflight
        ops = OpTable(capacity: shape.rate == nil ? closedTarget : LoadShape.maxOutstanding)
    }

    var isFinished: Bool { started && stopIssuing && ops.outstanding == 0 && followUps == 0 }
    var isOpenLoop: Bool { shape.rate != nil }

    /// Starts issuing; warm-up first, then the measured part.
    func start(loop: EventLoop) throws(BenchError) {
        started = true
        startNanos = Clocks.monotonicNanoseconds()
        measureStart = startNanos + UInt64(shape.warmupSeconds * 1e9)
        if case .duration(let seconds) = shape.stop { measureEnd = measureStart + UInt64(seconds * 1e9) }
        if let rate = shape.rate {
            intervalNanos = 1e9 / rate
            let bound = LoopBound(self, loop: loop)
            let pacer = Pacer(startNanos: startNanos, ratePerSecond: rate, handle: loop.handle) { bound.value.catchUp() }
            self.pacer = pacer
            try pacer.start()
        } else {
            fill(now: startNanos)
        }
    }

    /// The run is over: stop the pacer and break the runner <-> workload cycle.
    func finish() {
        pacer?.stop()
        pacer = nil
        workload = nil
    }

    // MARK: issuing

    private func issue(intended: UInt64) -> Bool {
        guard !stopIssuing else { return false }
        let measured = intended >= measureStart
        if measured {
            switch shape.stop {
            case .duration:
                if intended >= measureEnd {
                    stopIssuing(at: intended)
                    return false
                }
            case .count(let count):
                if issuedMeasured >= count {
                    stopIssuing(at: intended)
                    return false
                }
            }
        }
        guard let workload, let (token, slot) = ops.allocate(start: intended, measured: measured) else { return false }
        guard workload.issue(token: token, slot: slot) else {
            ops.release(slot)
            return false
        }
        if measured { issuedMeasured += 1 }
        return true
    }

    private func stopIssuing(at now: UInt64) {
        guard !stopIssuing else { return }
        stopIssuing = true
        drainDeadline = now + UInt64(Runner.drainSeconds * 1e9)
        pacer?.stop()
    }

    /// Closed loop: top up to the target number in flight.
    private func fill(now: UInt64) {
        while ops.outstanding < closedTarget, issue(intended: now) {}
    }

    /// Open loop: send every operation due by now (the pacer's tick, and after a
    /// completion when operations were held back for lack of room).
    func catchUp() {
        guard !stopIssuing else { return }
        let now = Clocks.monotonicNanoseconds()
        let due = UInt64(Double(now &- startNanos) / intervalNanos) + 1
        backlogged = false
        while nextIndex < due {
            let intended = startNanos + UInt64(Double(nextIndex) * intervalNanos)
            guard issue(intended: intended) else {
                backlogged = !stopIssuing
                return
            }
            nextIndex += 1
        }
    }

    // MARK: completions

    /// The start time of a live operation's slot.
    func startTime(slot: Int) -> UInt64 { ops.start[slot] }
    func isMeasured(slot: Int) -> Bool { ops.measured[slot] }

    /// Operation `token` succeeded; its latency runs from its start to `end`.
    func complete(token: UInt32, end: UInt64) {
        guard let slot = ops.slot(of: token) else { return }
        complete(slot: slot, end: end)
    }

    func complete(slot: Int, end: UInt64) {
        let start = ops.start[slot]
        if ops.measured[slot] {
            let micros = end > start ? (end - start) / 1_000 : 0
            _ = histogram.record(min(max(micros, 1), histogram.highestTrackableValue))
            completedMeasured += 1
            if end > lastMeasuredEnd { lastMeasuredEnd = end }
        }
        completedAll += 1
        ops.release(slot)
        released()
    }

    func followUpSent() { followUps += 1 }

    /// A follow-up was answered (`failure`: why not with success), at `end`.
    func followUpAnswered(measured: Bool, end: UInt64, failure: String? = nil) {
        guard followUps > 0 else { return }
        followUps -= 1
        if let failure { count(failure) }
        if measured, end > lastMeasuredEnd { lastMeasuredEnd = end }
    }

    /// Operation `token` failed with `reason` (a status name, or what went wrong).
    func fail(token: UInt32, reason: String) {
        guard let slot = ops.slot(of: token) else {
            count(reason)
            return
        }
        fail(slot: slot, reason: reason)
    }

    func fail(slot: Int, reason: String) {
        count(reason)
        ops.release(slot)
        released()
    }

    /// An error that belongs to no operation (a MISSED notice, an unexpected frame).
    func count(_ reason: String, by amount: UInt64 = 1) {
        errors[reason, default: 0] += amount
    }

    private func released() {
        if !isOpenLoop {
            if !stopIssuing { fill(now: Clocks.monotonicNanoseconds()) }
        } else if backlogged {
            catchUp()
        }
    }

    /// A connection the workload needs is gone: stop, and count what was in flight as lost.
    func abort(reason: String) {
        count(reason)
        guard !aborted else { return }
        aborted = true
        stopIssuing(at: Clocks.monotonicNanoseconds())
        abandonOutstanding(as: "lost")
    }

    private func abandonOutstanding(as reason: String) {
        if ops.outstanding > 0 { count(reason, by: UInt64(ops.outstanding)) }
        if followUps > 0 { count(reason, by: UInt64(followUps)) }
        ops.releaseAll()
        followUps = 0
    }

    /// From the driver's heartbeat: the end of a timed run, and the drain deadline.
    func heartbeat() {
        guard started else { return }
        let now = Clocks.monotonicNanoseconds()
        if !stopIssuing, now >= measureEnd { stopIssuing(at: now) }
        if stopIssuing, ops.outstanding > 0 || followUps > 0, now >= drainDeadline { abandonOutstanding(as: "timeout") }
    }

    // MARK: report

    /// The measured window: from the first measured start to the last measured completion
    /// (open loop: at least the time the rate allots to that many operations, so that
    /// N operations are not counted over only N-1 intervals).
    var measuredSeconds: Double {
        let window = lastMeasuredEnd > measureStart ? Double(lastMeasuredEnd - measureStart) / 1e9 : 0
        guard let rate = shape.rate, completedMeasured > 0 else { return window }
        return max(window, Double(completedMeasured) / rate)
    }

    /// Seconds the driver should allow the whole run before giving up.
    var timeoutSeconds: Double {
        let measured: Double = switch shape.stop {
        case .duration(let seconds): seconds
        case .count(let count): shape.rate.map { Double(count) / $0 } ?? 600
        }
        return shape.warmupSeconds + measured + Runner.drainSeconds + 30
    }

    func report(scenario: Scenario, parameters: [(String, ReportValue)]) -> BenchReport {
        var report = BenchReport(scenario: scenario.rawValue, parameters: parameters + shape.parameters(for: scenario),
                                 operations: completedMeasured, seconds: measuredSeconds, latency: histogram)
        report.errors = errors
        report.extra = extras
        return report
    }
}
