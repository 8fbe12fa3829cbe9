#if canImport(Glibc)
import Glibc
import PushSession
#endif

/// CPU time of the bench and of the services over the measured window, from
/// /proc/PID/stat: on a shared 2-core machine it tells which process a scenario is
/// limited by (a process near 100 % of a core is the bottleneck).
struct CPUUsage {
    struct Sample {
        var nanos: UInt64
        var ticks: [String: Int]
    }

    private let processes: [(String, pid_t)]
    private var first: Sample?
    private var last: Sample?

    /// With `countPostgres`, every process of this machine named `postgres` (the server
    /// a PostgreSQL store talks to, its backends and its WAL writer) is added up as one.
    init(stores: [pid_t], gateway: pid_t?, countPostgres: Bool = false) {
        var list: [(String, pid_t)] = [("bench", getpid())]
        for (index, store) in stores.enumerated() { list.append((stores.count == 1 ? "store" : "store\(index + 1)", store)) }
        if let gateway { list.append(("gateway", gateway)) }
        processes = list
        self.countPostgres = countPostgres
    }

    private let countPostgres: Bool

    mutating func begin() { first = sample() }
    mutating func end() { last = sample() }
    var hasBegun: Bool { first != nil }

    /// `cpu_NAME_pct`: percent of one core each process used between begin and end.
    var extras: [(String, Double)] {
        guard let first, let last, last.nanos > first.nanos else { return [] }
        let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))
        let seconds = Double(last.nanos - first.nanos) / 1e9
        return (processes.map(\.0) + (countPostgres ? ["postgres"] : [])).compactMap { name in
            guard let start = first.ticks[name], let stop = last.ticks[name] else { return nil }
            return ("cpu_\(name)_pct", (Double(stop - start) / ticksPerSecond / seconds * 1000).rounded() / 10)
        }
    }

    private func sample() -> Sample {
        var ticks: [String: Int] = [:]
        for (name, pid) in processes {
            if let used = CPUUsage.ticks(pid) { ticks[name] = used }
        }
        if countPostgres { ticks["postgres"] = CPUUsage.postgresTicks() }
        return Sample(nanos: Clocks.monotonicNanoseconds(), ticks: ticks)
    }

    /// utime + stime of every process named `postgres`. A backend that exits between two
    /// samples takes its ticks with it; the stores' connections live as long as the run.
    private static func postgresTicks() -> Int {
        guard let directory = opendir("/proc") else { return 0 }
        defer { closedir(directory) }
        var total = 0
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard let pid = pid_t(name), let comm = try? readTextFile("/proc/\(pid)/comm"), comm.hasPrefix("postgres") else { continue }
            total += ticks(pid) ?? 0
        }
        return total
    }

    /// utime + stime of every thread of the process, in clock ticks.
    private static func ticks(_ pid: pid_t) -> Int? {
        guard let text = try? readTextFile("/proc/\(pid)/stat"), let close = text.lastIndex(of: ")") else { return nil }
        // After "pid (comm) ": state is field 3, utime 14, stime 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Int(fields[11]), let system = Int(fields[12]) else { return nil }
        return user + system
    }
}
