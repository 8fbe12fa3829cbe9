/// Keeps a log line about something a peer can repeat at will (a refused HELLO, a
/// rate-limited request) to one per interval: the first event logs at once, the ones
/// after it within the interval are counted and reported by the next line, or by
/// `due` once the interval is over. No I/O; the caller logs.
public struct LogThrottle: Sendable {
    public let intervalMs: Int64
    private var lastLoggedAt: Int64?
    private var unlogged = 0

    public init(intervalMs: Int64 = 1_000) {
        self.intervalMs = intervalMs
    }

    /// An event happened: how many events the line to log now reports (this one and those
    /// held back before it), or nil to stay quiet.
    public mutating func event(nowMs: Int64) -> Int? {
        unlogged += 1
        if let last = lastLoggedAt, nowMs - last < intervalMs { return nil }
        return take(nowMs: nowMs)
    }

    /// Events held back whose line is due now (the interval since the last line is over).
    public mutating func due(nowMs: Int64) -> Int? {
        guard unlogged > 0, let last = lastLoggedAt, nowMs - last >= intervalMs else { return nil }
        return take(nowMs: nowMs)
    }

    private mutating func take(nowMs: Int64) -> Int {
        let count = unlogged
        unlogged = 0
        lastLoggedAt = nowMs
        return count
    }
}
