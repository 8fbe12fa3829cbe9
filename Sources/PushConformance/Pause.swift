#if canImport(Glibc)
import Glibc
#endif

/// Short sleeps for the cases that wait on the server's clock (an expiry, a TTL).
enum Pause {
    static func sleep(ms: Int) {
        guard ms > 0 else { return }
        usleep(UInt32(ms) * 1000)
    }
}
