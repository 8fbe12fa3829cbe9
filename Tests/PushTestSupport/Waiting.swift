#if canImport(Glibc)
import Glibc
#endif
import PushClock
import PushEventLoop
import PushSession

/// Polls `condition` until it holds or `timeoutSeconds` pass; returns whether it held.
/// For state another thread or process changes (a service on its loop thread, a server
/// starting), when there is no event to block on. `pollMilliseconds` spaces out conditions
/// that cost something each time (a connection, a HELLO, a query).
@discardableResult
public func waitUntil(timeoutSeconds: Double = 10, pollMilliseconds: Int = 2, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Clocks.monotonicMilliseconds() + Int64(timeoutSeconds * 1000)
    while try !condition() {
        guard Clocks.monotonicMilliseconds() < deadline else { return false }
        usleep(useconds_t(pollMilliseconds * 1000))
    }
    return true
}
