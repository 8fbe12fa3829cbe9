#if canImport(Glibc)
import Glibc
#endif

/// Every clock the project reads, in one place. Sessions take times as arguments;
/// their drivers read them here.
public enum Clocks {
    /// Milliseconds on a monotonic clock cheap enough to read on every read callback
    /// (CLOCK_MONOTONIC_COARSE: a few milliseconds of resolution): deadlines and keepalive.
    public static func monotonicMilliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC_COARSE, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }

    /// Nanoseconds on the precise monotonic clock: latencies and durations being measured.
    public static func monotonicNanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    /// Unix time in milliseconds: expiries that cross processes (tokens, TTLs, credentials).
    public static func wallMilliseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UInt64(now.tv_sec) * 1000 + UInt64(now.tv_nsec) / 1_000_000
    }
}
