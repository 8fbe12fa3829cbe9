#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Stops what this process started if it dies without stopping it itself (a crash,
/// SIGKILL, a test runner that aborts): its children would otherwise run on, holding
/// ports and files, and namespaces or links made for a test would stay. One watchdog
/// shell per process, started with the first child, checks every second that the process
/// is alive; once it is gone, it kills every child it was told of that still runs (the
/// same process, by its start time, not a later one given the pid) and runs the `ip`
/// cleanups it was given. A child stopped normally is left out by that check.
public enum OrphanGuard {
    private struct State {
        var ledger: String?
        var failed = false
    }

    private static let state = Mutex(State())

    /// Kill `pid` if this process dies while it runs.
    static func watch(_ pid: pid_t) {
        guard let start = startTime(of: pid) else { return }
        append("pid \(pid) \(start)\n")
    }

    /// Run `ip ARGUMENTS` if this process dies (`ip netns del NAME`, `ip link del NAME`).
    /// The arguments must hold no shell syntax: they are read as words.
    public static func cleanUp(ip arguments: [String]) {
        append("ip " + arguments.joined(separator: " ") + "\n")
    }

    private static func append(_ line: String) {
        state.withLock { state in
            guard !state.failed else { return }
            if state.ledger == nil {
                state.ledger = startWatchdog()
                if state.ledger == nil { state.failed = true; return }
            }
            guard let ledger = state.ledger else { return }
            let fd = open(ledger, O_WRONLY | O_APPEND)
            guard fd >= 0 else { return }
            defer { close(fd) }
            _ = line.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, $0.count - 1) }
        }
    }

    /// The ledger's path, once the watchdog that reads it runs.
    private static func startWatchdog() -> String? {
        let ledger = "/tmp/securepush-orphans-\(getpid())"
        let fd = open(ledger, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { return nil }
        close(fd)
        // Field 22 of /proc/PID/stat is the start time; counted after the name's ") ",
        // as a name may hold spaces, it is the 20th.
        let script = """
            while kill -0 \(getpid()) 2>/dev/null; do sleep 1; done
            while read -r kind a b c d e; do
              case "$kind" in
                pid) [ "$(sed 's/.*) //' /proc/$a/stat 2>/dev/null | cut -d' ' -f20)" = "$b" ] && kill -KILL "$a" ;;
                ip) ip $a $b $c $d $e >/dev/null 2>&1 ;;
              esac
            done < \(ledger)
            rm -f \(ledger)
            """
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for descriptor in Int32(0)...2 { posix_spawn_file_actions_addopen(&actions, descriptor, "/dev/null", O_RDWR, 0) }
        let argv: [UnsafeMutablePointer<CChar>?] = ["/bin/sh", "-c", script].map { (text: String) in strdup(text) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid = pid_t()
        guard posix_spawn(&pid, "/bin/sh", &actions, nil, argv, environ) == 0 else {
            unlink(ledger)
            return nil
        }
        return ledger
    }

    /// The start time of `pid` (field 22 of /proc/PID/stat), which tells it from a later
    /// process given the same pid.
    static func startTime(of pid: pid_t) -> String? {
        guard let file = fopen("/proc/\(pid)/stat", "r") else { return nil }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 1024)
        guard fgets(&buffer, Int32(buffer.count), file) != nil else { return nil }
        let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        // After the name's closing parenthesis, the last in the line.
        guard let close = bytes.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = bytes[(close + 1)...].split(separator: UInt8(ascii: " "))
        return fields.count > 19 ? String(decoding: fields[19], as: UTF8.self) : nil
    }
}
