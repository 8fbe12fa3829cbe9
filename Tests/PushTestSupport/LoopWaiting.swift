import PushClock
import PushEventLoop
import PushSession

extension EventLoop {
    /// Runs the loop until `condition` holds or `timeoutSeconds` pass; returns whether it held.
    @discardableResult
    public func run(until condition: @escaping () -> Bool, timeoutSeconds: Double = 10) -> Bool {
        let deadline = Clocks.monotonicMilliseconds() + Int64(timeoutSeconds * 1000)
        let poll = schedule(after: .milliseconds(5), repeating: true) { [unowned self] in
            if condition() || Clocks.monotonicMilliseconds() > deadline { stop() }
        }
        if !condition() { run() }
        poll.cancel()
        return condition()
    }
}
