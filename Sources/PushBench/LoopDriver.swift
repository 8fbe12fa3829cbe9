#if canImport(Glibc)
import Glibc
#endif
import PushClock
import PushEventLoop
import PushSession

/// Runs the bench's event loop on the calling thread one phase at a time: setup phases
/// (connect, log in, preload) and the measured run are each "run the loop until this
/// holds", with a bound on time and a way out on SIGINT.
final class LoopDriver {
    let loop: EventLoop
    private var interrupted = false
    private var signal: SignalHandler?
    /// Called from the heartbeat (every 20 ms) while driving: deadlines, progress.
    var onHeartbeat: (() -> Void)?

    init(loop: EventLoop) {
        self.loop = loop
        signal = loop.onSignal(SIGINT) { [unowned self] in self.interrupted = true }
    }

    func cancel() {
        signal?.cancel()
        signal = nil
    }

    /// Runs the loop until `done()` holds; throws on timeout or SIGINT.
    func drive(phase: String, timeoutSeconds: Double, until done: () -> Bool) throws(BenchError) {
        let deadline = Clocks.monotonicNanoseconds() + UInt64(timeoutSeconds * 1e9)
        // A timer that always fires keeps a blocking iteration from waiting forever when
        // nothing else happens (a stalled server, a deadline to notice).
        let heartbeat = loop.schedule(after: .milliseconds(20), repeating: true) { [unowned self] in self.onHeartbeat?() }
        defer { heartbeat.cancel() }
        while !done() {
            if interrupted { throw .interrupted }
            guard Clocks.monotonicNanoseconds() < deadline else { throw .timeout("\(phase) (after \(Int(timeoutSeconds)) s)") }
            loop.runOnce(blocking: true)
        }
    }

    /// Runs the loop for `seconds` (holding connections, letting queues settle).
    func idle(seconds: Double) throws(BenchError) {
        let until = Clocks.monotonicNanoseconds() + UInt64(seconds * 1e9)
        try drive(phase: "idle", timeoutSeconds: seconds + 5) { Clocks.monotonicNanoseconds() >= until }
    }
}
