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

    /// Other stores of the database have counted `limit` failures for `key` in the window
    /// that started at `windowStart`: limited here too until it ends.
    mutating func markLimited(_ key: String, windowStart: UInt64) {
        if let window = windows[key], window.startMs == windowStart, window.failures >= limit { return }
        windows[key] = Window(startMs: windowStart, failures: limit)
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
