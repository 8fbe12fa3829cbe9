#if canImport(Glibc)
import Glibc
#endif

/// Whether a directory can take writes now, for a readiness check: its file system is
/// not mounted read-only, has room, and a small file can be created, written and removed
/// in it. The answer is kept for `cacheMs`, so probes as fast as a client can send them
/// cost one file creation per interval. Blocking file I/O: meant for a probe every few
/// seconds, not for the hot path.
public struct WritableDirectoryProbe: Sendable {
    public let directory: String
    /// Less free space than this (for an unprivileged user) is reported as a problem.
    public let minimumFreeBytes: UInt64
    public let cacheMs: Int64
    private var lastProbeMs: Int64?
    private var lastProblem: String?

    public static let probeFileName = ".securepush-write-probe"

    public init(directory: String, minimumFreeBytes: UInt64 = 16 << 20, cacheMs: Int64 = 1_000) {
        self.directory = directory
        self.minimumFreeBytes = minimumFreeBytes
        self.cacheMs = cacheMs
    }

    /// Nil when the directory takes writes, else one line saying why it does not.
    public mutating func problem(nowMs: Int64) -> String? {
        if let last = lastProbeMs, nowMs - last < cacheMs { return lastProblem }
        lastProbeMs = nowMs
        lastProblem = probe()
        return lastProblem
    }

    private func probe() -> String? {
        var info = statvfs()
        guard statvfs(directory, &info) == 0 else { return "cannot check \(directory): \(String(cString: strerror(errno)))" }
        if info.f_flag & UInt(ST_RDONLY) != 0 { return "the file system of \(directory) is mounted read-only" }
        let free = UInt64(info.f_bavail) * UInt64(info.f_frsize)
        if free < minimumFreeBytes {
            return "\(free >> 20) MiB free on the file system of \(directory), under the \(minimumFreeBytes >> 20) MiB needed"
        }
        let path = directory + "/" + WritableDirectoryProbe.probeFileName
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return "cannot write in \(directory): \(String(cString: strerror(errno)))" }
        var byte: UInt8 = 0
        let written = write(fd, &byte, 1)
        let writeError = errno
        close(fd)
        unlink(path)
        guard written == 1 else { return "cannot write in \(directory): \(String(cString: strerror(writeError)))" }
        return nil
    }
}
