#if canImport(Glibc)
import Glibc
#endif

extension MetricsRegistry {
    /// The standard `process_*` metrics of Prometheus clients, read from /proc/self at
    /// scrape time (one read of /proc/self/stat per scrape). Nothing is registered where
    /// /proc is missing.
    public func addProcessMetrics() {
        guard let first = ProcessSample.read() else { return }
        var sample = first
        beforeCollect { sample = ProcessSample.read() ?? sample }
        counter("process_cpu_seconds_total", help: "Total user and system CPU time spent in seconds.") { sample.cpuSeconds }
        gauge("process_resident_memory_bytes", help: "Resident memory size in bytes.") { Double(sample.residentBytes) }
        gauge("process_virtual_memory_bytes", help: "Virtual memory size in bytes.") { Double(sample.virtualBytes) }
        gauge("process_open_fds", help: "Number of open file descriptors.") { Double(sample.openFDs) }
        gauge("process_max_fds", help: "Maximum number of open file descriptors.") { Double(sample.maxFDs) }
        let started = first.startTimeSeconds
        gauge("process_start_time_seconds", help: "Start time of the process since unix epoch in seconds.") { started }
    }

    /// `securepush_build_info{version="..."} 1`: which build is running.
    public func addBuildInfo(version: String) {
        gauge("securepush_build_info", help: "The securepush build that is running, in the version label; always 1.",
              labels: [("version", version)]) { 1 }
    }
}

/// What /proc/self says about this process.
struct ProcessSample {
    var cpuSeconds: Double
    var residentBytes: Int
    var virtualBytes: Int
    var startTimeSeconds: Double
    var openFDs: Int
    var maxFDs: Int

    static func read() -> ProcessSample? {
        guard let stat = readSmallFile("/proc/self/stat"),
              let close = stat.lastIndex(of: UInt8(ascii: ")"))
        else { return nil }
        // Fields after the command name (which may hold spaces, hence the last ")"): the
        // state is field 3 of proc(5), so field N is at index N - 3.
        let fields = stat[(close + 1)...].split(separator: UInt8(ascii: " ")).map { String(decoding: $0, as: UTF8.self) }
        guard fields.count > 21,
              let utime = Double(fields[11]), let stime = Double(fields[12]),
              let startTicks = Double(fields[19]), let virtual = Int(fields[20]), let residentPages = Int(fields[21])
        else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let pageSize = sysconf(Int32(_SC_PAGESIZE))
        var limit = rlimit()
        getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        return ProcessSample(cpuSeconds: (utime + stime) / ticks, residentBytes: residentPages * pageSize,
                             virtualBytes: virtual, startTimeSeconds: bootTime() + startTicks / ticks,
                             openFDs: countOpenFDs(), maxFDs: Int(clamping: limit.rlim_cur))
    }

    /// Seconds since the epoch at boot (`btime` in /proc/stat).
    private static func bootTime() -> Double {
        guard let text = readSmallFile("/proc/stat") else { return 0 }
        for line in text.split(separator: UInt8(ascii: "\n")) where line.starts(with: "btime ".utf8) {
            return Double(String(decoding: line.dropFirst(6), as: UTF8.self)) ?? 0
        }
        return 0
    }

    /// Entries of /proc/self/fd, less the one open to read it.
    private static func countOpenFDs() -> Int {
        guard let directory = opendir("/proc/self/fd") else { return 0 }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            let isDot = withUnsafeBytes(of: entry.pointee.d_name) { name in
                name[0] == UInt8(ascii: ".") && (name[1] == 0 || (name[1] == UInt8(ascii: ".") && name[2] == 0))
            }
            if !isDot { count += 1 }
        }
        return max(0, count - 1)
    }

    private static func readSmallFile(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            bytes.append(contentsOf: chunk[..<count])
        }
        return bytes
    }
}
