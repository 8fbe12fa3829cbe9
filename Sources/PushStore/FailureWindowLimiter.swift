/// Counts failures per key (a client address) in a fixed window: BAD_TOKEN answers, so
/// forged tokens cannot be tried in bulk ([8-9]).
struct FailureWindowLimiter {
    private struct Window {
        var startMs: UInt64
        var failures: Int
    }

    let limit: Int
    let windowMs: UInt64
    private var windows: [String: Window] = [:]

    init(limit: Int, windowMs: UInt64) {
        self.limit = limit
        self.windowMs = windowMs
    }

    func isLimited(_ key: String, nowMs: UInt64) -> Bool {
        // Asked on every FETCH: no offender, no hashing of the key.
        guard !windows.isEmpty, let window = windows[key], isOpen(window, nowMs: nowMs) else { return false }
        return window.failures >= limit
    }

    mutating func recordFailure(_ key: String, nowMs: UInt64) {
        if var window = windows[key], isOpen(window, nowMs: nowMs) {
            window.failures += 1
            windows[key] = window
        } else {
            windows[key] = Window(startMs: nowMs, failures: 1)
        }
    }

    mutating func recordSuccess(_ key: String) {
        windows[key] = nil
    }

    /// Forgets windows that have ended, so the table holds only recent offenders.
    mutating func prune(nowMs: UInt64) {
        windows = windows.filter { isOpen($0.value, nowMs: nowMs) }
    }

    /// A wall clock stepped back before a window's start ends that window rather than
    /// underflowing.
    private func isOpen(_ window: Window, nowMs: UInt64) -> Bool {
        nowMs >= window.startMs && nowMs - window.startMs < windowMs
    }

    var trackedCount: Int { windows.count }
}
