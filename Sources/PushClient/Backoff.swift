/// The waits of a client that retries (SPEC.md 5.8-1, 5.8-2): a nominal value that starts at
/// `baseMs`, doubles with each wait in a row up to `capMs`, and is drawn at random between
/// 0.75 and 1.25 times the nominal value. That range is half as wide as the value, so clients
/// that lost a server together do not come back together, and narrow enough that each wait
/// before the cap is longer than the one before it. Pure logic; tests fix `random`.
struct Backoff {
    let baseMs: Int64
    let capMs: Int64
    /// The nominal value of the last wait; 0 before the first (or after `reset`).
    private(set) var nominalMs: Int64 = 0
    var random: (ClosedRange<Int64>) -> Int64 = { Int64.random(in: $0) }

    init(baseMs: Int64, capMs: Int64) {
        self.baseMs = max(1, baseMs)
        self.capMs = max(self.baseMs, capMs)
    }

    /// The wait before the next attempt, one step longer than the last.
    mutating func next() -> Int64 {
        nominalMs = min(max(nominalMs * 2, baseMs), capMs)
        return Backoff.jittered(nominalMs, random: random)
    }

    /// The next wait starts from `baseMs` again.
    mutating func reset() { nominalMs = 0 }

    /// `nominal` drawn between 0.75 and 1.25 times itself.
    static func jittered(_ nominal: Int64, random: (ClosedRange<Int64>) -> Int64) -> Int64 {
        nominal - nominal / 4 + random(0...(nominal / 2))
    }
}
