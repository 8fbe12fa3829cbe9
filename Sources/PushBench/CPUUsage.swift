#if canImport(Glibc)
import Glibc
import PushClock
import PushSession
#endif

/// CPU time of the bench and of the services over the measured window, from
/// /proc/PID/stat: on a shared 2-core machine it tells which process a scenario is
/// limited by (a process near 100 % of a core is the bottleneck). Several gateways are
/// reported each (`gateway1`, ...) and summed (`gateways`); a cluster's nats-server as `nats`.
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
    init(stores: [pid_t], gateways: [pid_t], nats: pid_t? = nil, countPostgres: Bool = false) {
        var list: [(String, pid_t)] = [("bench", getpid())]
        for (index, store) in stores.enumerated() { list.append((stores.count == 1 ? "store" : "store\(index + 1)", store)) }
        let gatewayNames = CPUUsage.gatewayNames(count: gateways.count)
        list += zip(gatewayNames, gateways).map { ($0, $1) }
        if let nats { list.append(("nats", nats)) }
        processes = list
        self.gatewayNames = gatewayNames
        self.countPostgres = countPostgres
    }

    /// `gateway` alone, else `gateway1` ... `gatewayN`.
    static func gatewayNames(count: Int) -> [String] {
        count == 1 ? ["gateway"] : (0..<count).map { "gateway\($0 + 1)" }
    }

    private let gatewayNames: [String]

    private let countPostgres: Bool

    mutating func begin() { first = sample() }
    mutating func end() { last = sample() }
    var hasBegun: Bool { first != nil }

    /// `cpu_NAME_pct`: percent of one core each process used between begin and end, and
    /// with several gateways `cpu_gateways_pct`, their sum.
    var extras: [(String, Double)] {
        guard let first, let last, last.nanos > first.nanos else { return [] }
        let seconds = Double(last.nanos - first.nanos) / 1e9
        func percent(_ cpuSeconds: Double) -> Double { (cpuSeconds / seconds * 1000).rounded() / 10 }
        var figures: [(String, Double)] = (processes.map(\.0) + (countPostgres ? ["postgres"] : [])).compactMap { name in
            cpuSeconds(of: [name]).map { ("cpu_\(name)_pct", percent($0)) }
        }
        if gatewayNames.count > 1, let sum = cpuSeconds(of: gatewayNames) { figures.append(("cpu_gateways_pct", percent(sum))) }
        return figures
    }

    /// CPU seconds of the push path between begin and end: every gateway and nats-server.
    var pushPathSeconds: Double? { cpuSeconds(of: gatewayNames + ["nats"]) }

    /// CPU seconds the named processes used between begin and end, summed over those sampled
    /// both times; nil when none was.
    func cpuSeconds(of names: [String]) -> Double? {
        guard let first, let last else { return nil }
        let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))
        var ticks = 0
        var any = false
        for name in names {
            guard let start = first.ticks[name], let stop = last.ticks[name] else { continue }
            ticks += stop - start
            any = true
        }
        return any ? Double(ticks) / ticksPerSecond : nil
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
