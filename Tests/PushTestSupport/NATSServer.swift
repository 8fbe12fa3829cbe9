#if canImport(Glibc)
import Glibc
#endif
import PushProcess

public struct NATSServerError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// A throwaway nats-server with JetStream a test starts itself: on free ports of
/// 127.0.0.1, its store in a temporary directory that `restart()` reuses (so JetStream
/// data survives it) and deinit removes. A watchdog shell stops the server and removes the
/// directory if the test process dies first.
public final class NATSServer: @unchecked Sendable {
    /// SECUREPUSH_NATS_SERVER if set, else Debian's /usr/sbin/nats-server, else PATH.
    public static let binary: String? = findBinary()

    public static var available: Bool { binary != nil }

    /// SECUREPUSH_REQUIRE_NATS=1 (CI) turns a missing binary into failures, not skips.
    public static var isRequired: Bool {
        guard let value = getenv("SECUREPUSH_REQUIRE_NATS") else { return false }
        return String(cString: value) == "1"
    }

    /// For `.enabled(if:)`: run when the server can start, and also when it is required,
    /// so its absence fails the tests with `missingMessage` instead of skipping them.
    public static var testsEnabled: Bool { available || isRequired }

    public static let missingMessage = "nats-server not found (/usr/sbin/nats-server or PATH): install Debian's nats-server package"

    public private(set) var port: Int
    public private(set) var monitorPort: Int
    /// The temporary directory: the JetStream store (jetstream/) and the pid file.
    public let directory: String
    private let executable: String
    /// Guards `server` and `watchdog` (a test may stop the server from another thread).
    private let lock = ProcessLock()
    private var server: ChildProcess?
    private var watchdog: ChildProcess?

    /// nats://127.0.0.1:PORT
    public var url: String { "nats://127.0.0.1:\(port)" }

    /// TLS and client authentication the server asks for (`NATSServerSecurity`).
    public let security: NATSServerSecurity

    /// Starts the server and waits until it accepts TCP connections.
    public init(security: NATSServerSecurity = NATSServerSecurity()) throws {
        guard let binary = Self.binary else { throw NATSServerError(Self.missingMessage) }
        executable = binary
        self.security = security
        port = try freeLoopbackPort()
        monitorPort = try freeLoopbackPort()
        var template = Array("/tmp/securepush-nats-XXXXXX".utf8CString)
        guard mkdtemp(&template) != nil else { throw NATSServerError("mkdtemp failed: \(String(cString: strerror(errno)))") }
        directory = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        do {
            try launchOnFreePorts()
        } catch {
            removeDirectory()
            throw error
        }
        startWatchdog()
    }

    deinit {
        stop()
        let watching = lock.withLock { () -> ChildProcess? in
            defer { watchdog = nil }
            return watchdog
        }
        watching?.killHard()
        removeDirectory()
    }

    /// SIGTERM (a clean shutdown, JetStream flushed) and waits for the exit; SIGKILL if
    /// that takes over 10 s. The directory stays for `restart()`.
    public func stop() {
        guard let server = takeServer() else { return }
        _ = server.terminate(graceSeconds: 10)
    }

    /// SIGKILL, as a crash, and waits for the exit.
    public func kill() {
        guard let server = takeServer() else { return }
        server.killHard()
    }

    /// SIGSTOP: the server keeps its sockets open but answers nothing, as a hung server or
    /// a network that drops every packet; `resume()` lets it go on.
    public func pause() {
        lock.withLock { server?.signal(SIGSTOP) }
    }

    public func resume() {
        lock.withLock { server?.signal(SIGCONT) }
    }

    /// Starts the server again on the same ports and store directory.
    public func restart() throws {
        guard lock.withLock({ server == nil }) else { throw NATSServerError("the server is still running") }
        try launch()
    }

    /// What the server wrote to stderr (its log), for failure messages.
    public var log: String { lock.withLock { server?.standardError } ?? "" }

    private func takeServer() -> ChildProcess? {
        lock.withLock { () -> ChildProcess? in
            defer { server = nil }
            return server
        }
    }

    /// A port handed out free can still be taken by another process (another test run on
    /// the machine) before the server binds it: then the server is started on other ports.
    private func launchOnFreePorts() throws {
        for attempt in 1... {
            do {
                return try launch()
            } catch let error as NATSServerError where error.description.contains("address already in use") && attempt < 5 {
                port = try freeLoopbackPort()
                monitorPort = try freeLoopbackPort()
            }
        }
    }

    private func launch() throws {
        let arguments = [
            "-a", "127.0.0.1", "-p", String(port), "-m", String(monitorPort),
            "-js", "-sd", directory, "-P", directory + "/nats.pid",
        ] + security.arguments
        let server: ChildProcess
        do {
            server = try ChildProcess(executable: executable, arguments: arguments, name: "nats-server")
        } catch {
            throw NATSServerError("cannot start nats-server: \(error)")
        }
        // Its own log says when it is ready: a port that accepts could be another server's.
        let ready = waitUntil(timeoutSeconds: 20, pollMilliseconds: 10) {
            server.hasExited || server.standardError.contains("Server is ready")
        }
        if server.hasExited {
            throw NATSServerError("nats-server exited (status \(server.exitStatus ?? -1)): \(server.standardError)")
        }
        guard ready else {
            server.killHard()
            throw NATSServerError("nats-server did not accept connections within 20 s: \(server.standardErrorTail)")
        }
        lock.withLock { self.server = server }
    }

    private func startWatchdog() {
        let script = """
            while kill -0 \(getpid()) 2>/dev/null; do sleep 1; done
            pid=$(cat '\(directory)/nats.pid' 2>/dev/null)
            [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
            rm -rf '\(directory)'
            """
        let watchdog = try? ChildProcess(executable: "/bin/sh", arguments: ["-c", script], name: "nats-watchdog")
        lock.withLock { self.watchdog = watchdog }
    }

    private func removeDirectory() {
        _ = try? ChildProcess.run(executable: "/bin/rm", arguments: ["-rf", directory], seconds: 30)
    }

    private static func findBinary() -> String? {
        if let chosen = getenv("SECUREPUSH_NATS_SERVER") {
            let path = String(cString: chosen)
            return access(path, X_OK) == 0 ? path : nil
        }
        var candidates = ["/usr/sbin/nats-server", "/usr/bin/nats-server"]
        if let path = getenv("PATH") {
            candidates += String(cString: path).split(separator: ":").map { "\($0)/nats-server" }
        }
        return candidates.first { access($0, X_OK) == 0 }
    }

}

/// A pthread mutex: Synchronization's Mutex wants `sending` results, and ChildProcess is not
/// Sendable.
private final class ProcessLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    init() { pthread_mutex_init(mutex, nil) }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}
