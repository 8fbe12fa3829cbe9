#if canImport(Glibc)
import Glibc
#endif

/// Time as the cases need it: wall-clock milliseconds for credentials and expiries,
/// monotonic milliseconds for durations, and short sleeps.
enum Clock {
    static func wallMs() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return UInt64(spec.tv_sec) * 1000 + UInt64(spec.tv_nsec) / 1_000_000
    }

    static func monotonicMs() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }

    static func sleep(ms: Int) {
        guard ms > 0 else { return }
        usleep(UInt32(ms) * 1000)
    }
}
