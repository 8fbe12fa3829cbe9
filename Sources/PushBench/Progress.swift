#if canImport(Glibc)
import Glibc
#endif
import PushClock
import PushEventLoop
import PushSession

/// A live status line on stderr, redrawn twice a second, only when stderr is a terminal
/// (scripts reading stdout, or logs, never see it).
final class ProgressLine {
    private let enabled: Bool
    private let scenario: String
    private var timer: LoopTimer?
    private var drawn = false
    private var lastCompleted: UInt64 = 0
    private var lastNanos: UInt64 = 0
    /// What to show now: set per phase by the scenario.
    var status: (() -> String)?

    init(scenario: Scenario, enabled: Bool) {
        self.scenario = scenario.rawValue
        self.enabled = enabled && isatty(STDERR_FILENO) == 1
    }

    func start(loop: EventLoop) {
        guard enabled else { return }
        timer = loop.schedule(after: .milliseconds(500), repeating: true) { [unowned self] in self.draw() }
    }

    /// The status line of a running load: rate over the last interval, p99 so far, errors.
    func follow(_ runner: Runner) {
        lastCompleted = runner.completedAll
        lastNanos = Clocks.monotonicNanoseconds()
        status = { [unowned self, unowned runner] in
            let now = Clocks.monotonicNanoseconds()
            let rate = Double(runner.completedAll - lastCompleted) / max(Double(now - lastNanos) / 1e9, 0.001)
            lastCompleted = runner.completedAll
            lastNanos = now
            let phase = now < runner.measureStart ? "warm-up" : runner.stopIssuing ? "draining" : "measuring"
            let p99 = runner.histogram.totalCount > 0 ? runner.histogram.valueAtPercentile(99) : 0
            let errors = runner.errors.values.reduce(0, +)
            return "\(phase)  \(Int(rate))/s  in flight \(runner.ops.outstanding)  p99 \(p99) us  errors \(errors)"
        }
    }

    private func draw() {
        guard let text = status?() else { return }
        write("\r\u{1B}[2K[\(scenario)] \(text)")
        drawn = true
    }

    /// Clears the line; idempotent.
    func stop() {
        timer?.cancel()
        timer = nil
        if drawn { write("\r\u{1B}[2K") }
        drawn = false
    }

    private func write(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }
}
