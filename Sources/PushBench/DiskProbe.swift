#if canImport(Glibc)
import Glibc
import PushClock
import PushSession
#endif

/// How long an fsync takes where the store keeps its data, measured just before a run:
/// a durable STORE cannot be answered faster than one, and on shared or virtual disks it
/// varies from a few hundred microseconds to several milliseconds within minutes.
enum DiskProbe {
    /// Median of `rounds` (4 KiB append + fdatasync) in `directory`, in microseconds.
    static func fsyncMedianMicros(in directory: String, rounds: Int = 25) -> Double? {
        let path = directory + "/.bench-fsync-probe"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return nil }
        defer {
            close(fd)
            unlink(path)
        }
        let block = [UInt8](repeating: 0x5A, count: 4096)
        var samples: [UInt64] = []
        for _ in 0..<rounds {
            guard block.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == block.count else { return nil }
            let start = Clocks.monotonicNanoseconds()
            guard fdatasync(fd) == 0 else { return nil }
            samples.append(Clocks.monotonicNanoseconds() - start)
        }
        samples.sort()
        return Double(samples[samples.count / 2] / 1_000)
    }
}
