import Glibc

extension EventLoop {
    /// Unix time in milliseconds: for expiries that cross processes (tokens, TTLs).
    /// Durations within a process use `monotonicMilliseconds()`.
    public static func wallClockMilliseconds() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return UInt64(spec.tv_sec) * 1000 + UInt64(spec.tv_nsec) / 1_000_000
    }
}
