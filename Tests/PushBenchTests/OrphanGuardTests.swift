import Foundation
import Glibc
import PushProcess
import PushTestSupport
import Testing

@Suite("What a process started does not outlive it", .ownThread)
struct OrphanGuardTests {
    /// The pids whose parent is `pid`, from /proc.
    static func children(of pid: pid_t) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { pid_t($0) }.filter { candidate in
            guard let stat = try? String(contentsOfFile: "/proc/\(candidate)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return false }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 1 && pid_t(fields[1]) == pid
        }
    }

    static func isRunning(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return false }
        return stat[stat.index(after: close)...].split(separator: " ").first != "Z"
    }

    @Test("a bench SIGKILLed while its embedded store runs: the store is stopped within seconds, not left running")
    func embeddedStoreStopsWithTheBench() throws {
        let bench = try ChildProcess(executable: SecurePushBinary.path,
                                     arguments: ["bench", "store", "--duration", "60", "--warmup", "0", "--no-progress"])
        defer { bench.killHard() }
        var store: pid_t?
        #expect(waitUntil(timeoutSeconds: 30) {
            store = Self.children(of: bench.pid).first { pid in
                ((try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8)) ?? "").contains("store")
            }
            return store != nil
        }, "the bench started its store")
        let orphan = try #require(store)
        // The bench writes a child into its watchdog's ledger just after spawning it; a
        // SIGKILL that lands in between (a loaded machine stretches that gap) would test
        // nothing but the race, so wait until the ledger names the store.
        let ledger = "/tmp/securepush-orphans-\(bench.pid)"
        #expect(waitUntil(timeoutSeconds: 30) {
            ((try? String(contentsOfFile: ledger, encoding: .utf8)) ?? "").contains("pid \(orphan) ")
        }, "the bench put its store \(orphan) in its watchdog's ledger")
        bench.killHard()
        #expect(waitUntil(timeoutSeconds: 10) { !Self.isRunning(orphan) }, "the store \(orphan) still runs after its bench died")
        if Self.isRunning(orphan) { kill(orphan, SIGKILL) }
    }
}
