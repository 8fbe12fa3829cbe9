#if canImport(Glibc)
import Glibc
#endif
import PushClock
import PushEventLoop
import PushSession

/// Polls `condition` until it holds or `timeoutSeconds` pass; returns whether it held.
/// For state another thread changes (a service on its loop thread), when there is no
/// event to block on.
@discardableResult
public func waitUntil(timeoutSeconds: Double = 10, _ condition: () -> Bool) -> Bool {
    let deadline = Clocks.monotonicMilliseconds() + Int64(timeoutSeconds * 1000)
    while !condition() {
        guard Clocks.monotonicMilliseconds() < deadline else { return false }
        usleep(2_000)
    }
    return true
}
