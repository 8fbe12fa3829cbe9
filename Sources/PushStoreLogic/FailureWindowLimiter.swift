/// A count of failures in a fixed window that starts at the first of them ([8-9]).
public struct FailureWindow: Sendable, Equatable {
    public var startMs: UInt64
    public var failures: Int

    public init(startMs: UInt64, failures: Int) {
        self.startMs = startMs
        self.failures = failures
    }

    /// Whether the window still counts at `nowMs`. A wall clock stepped back before its
    /// start ends it rather than underflowing.
    func isOpen(nowMs: UInt64, windowMs: UInt64) -> Bool {
        nowMs >= startMs && nowMs - startMs < windowMs
    }

    /// The earliest start of a window still open at `nowMs`.
    package static func earliestOpenStart(nowMs: UInt64, windowMs: UInt64) -> UInt64 {
        nowMs >= windowMs ? nowMs - windowMs + 1 : 0
    }

    /// The rule for windows, the one place it is stated, wherever two counts of one key
    /// meet: a new failure and this store's window, a store's batch and the window the
    /// database holds for every store. Only a window open at `nowMs` counts; two open
    /// windows (less than a window apart, so batches written in any order add up) are one,
    /// from the earlier start, with both counts. Nil when neither is open.
    package static func merged(_ first: FailureWindow?, _ second: FailureWindow?, nowMs: UInt64, windowMs: UInt64) -> FailureWindow? {
        let open = [first, second].compactMap { $0 }.filter { $0.isOpen(nowMs: nowMs, windowMs: windowMs) }
        guard let one = open.first else { return nil }
        guard open.count == 2 else { return one }
        return FailureWindow(startMs: min(open[0].startMs, open[1].startMs), failures: open[0].failures + open[1].failures)
    }
}

/// A key's window of failures, as a store hands it to a database that counts for every
/// store (`WriteOperation.tokenFailures`).
public struct KeyedFailureWindow: Sendable, Equatable {
    public var key: String
    public var window: FailureWindow

    public init(key: String, window: FailureWindow) {
        self.key = key
        self.window = window
    }
}

/// Counts failures per key (a client address) in a fixed window: BAD_TOKEN answers, so
/// forged tokens cannot be tried in bulk ([8-9]). Counted by `FailureWindow.merged`.
struct FailureWindowLimiter {
    let limit: Int
    let windowMs: UInt64
    private var windows: [String: FailureWindow] = [:]

    init(limit: Int, windowMs: UInt64) {
        self.limit = limit
        self.windowMs = windowMs
    }

    func isLimited(_ key: String, nowMs: UInt64) -> Bool {
        // Asked on every FETCH: no offender, no hashing of the key.
        guard !windows.isEmpty, let window = windows[key], window.isOpen(nowMs: nowMs, windowMs: windowMs) else { return false }
        return window.failures >= limit
    }

    mutating func recordFailure(_ key: String, nowMs: UInt64) {
        windows[key] = FailureWindow.merged(windows[key], FailureWindow(startMs: nowMs, failures: 1), nowMs: nowMs, windowMs: windowMs)
    }

    /// Other stores of the database have counted `limit` failures for `key` in the window
    /// that started at `windowStart`: limited here too until it ends. The database's window
    /// is taken as it is, as the login limits take the database's state.
    mutating func markLimited(_ key: String, windowStart: UInt64) {
        if let window = windows[key], window.startMs == windowStart, window.failures >= limit { return }
        windows[key] = FailureWindow(startMs: windowStart, failures: limit)
    }

    mutating func recordSuccess(_ key: String) {
        windows[key] = nil
    }

    /// Forgets windows that have ended, so the table holds only recent offenders.
    mutating func prune(nowMs: UInt64) {
        windows = windows.filter { $0.value.isOpen(nowMs: nowMs, windowMs: windowMs) }
    }

    /// Every window counted, taken out (for a store's batch to the database).
    mutating func takeWindows() -> [KeyedFailureWindow] {
        defer { windows = [:] }
        return windows.map { KeyedFailureWindow(key: $0.key, window: $0.value) }
    }

    var trackedCount: Int { windows.count }
}
