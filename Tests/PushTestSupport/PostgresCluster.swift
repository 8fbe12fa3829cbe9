#if canImport(Glibc)
import Glibc
#endif
import PushPostgres
import PushProcess
import Synchronization

public struct PostgresClusterError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// A throwaway PostgreSQL server a test run starts itself: initdb into a temporary
/// directory (in memory where it can be: `parentDirectory`), `postgres` on a free port of
/// 127.0.0.1 with trust authentication for 127.0.0.1 only, its Unix socket in that
/// directory, fsync on. `.debian` sets it up as
/// Debian's postgresql package does instead (PostgresCluster+Debian.swift).
///
/// initdb and postgres refuse to run as root, so as root both run as the `postgres` system
/// user (Debian's postgresql package creates it) through `setpriv`, which execs in place: the
/// child's pid is the postmaster's, so `kill()` hits the server, not a wrapper. Not root,
/// they run as the current user. A watchdog shell stops the server and removes the directory
/// if the test process dies without `stop()`.
public final class PostgresCluster: @unchecked Sendable {
    /// Where the server binaries are: SECUREPUSH_POSTGRES_BINDIR if set (and only there), else
    /// the highest version under /usr/lib/postgresql (Debian), else PATH.
    public static let binaries: (initdb: String, postgres: String)? = findBinaries()

    public static var isAvailable: Bool { binaries != nil }

    /// SECUREPUSH_REQUIRE_POSTGRES=1 (CI) turns missing binaries into failures, not skips.
    public static var isRequired: Bool {
        guard let value = getenv("SECUREPUSH_REQUIRE_POSTGRES") else { return false }
        return String(cString: value) == "1"
    }

    /// For `.enabled(if:)`: run when the server can start, and also when it is required, so
    /// its absence fails the tests with `missingMessage` instead of skipping them.
    public static var testsEnabled: Bool { isAvailable || isRequired }

    public static let missingMessage = """
        PostgreSQL server binaries (initdb, postgres) not found in /usr/lib/postgresql/*/bin or PATH: \
        install Debian's postgresql package (.ci/run does)
        """

    /// How clients authenticate and whether it speaks TLS.
    public enum Setup: Sendable, Hashable {
        /// Trust on 127.0.0.1, no TLS: tests connect as the superuser without a password.
        case trust
        /// As Debian's package configures it: peer on the Unix socket, scram-sha-256 on
        /// TCP (127.0.0.1 and ::1), `password_encryption = scram-sha-256`, `ssl = on` with a
        /// self-signed certificate. It listens on 127.0.0.1 only (Debian: localhost), where
        /// its port was found free.
        case debian
    }

    public let setup: Setup
    public private(set) var port: Int
    /// The temporary directory: data/ inside it, and the Unix socket.
    public let directory: String
    /// The superuser the URLs connect as.
    public let user: String
    /// The superuser's password with `.debian` (its TCP logins need one), else nil.
    let superuserPassword: String?
    private let binaries: (initdb: String, postgres: String)
    /// Prefix that runs a command as the server's user (empty when not root).
    private let asServerUser: [String]
    /// The server's user and group when the tests run as root, who own its files.
    let owner: (uid: uid_t, gid: gid_t)?
    /// Guards the four fields below (tests share the cluster across threads).
    private let lock = PlainLock()
    private var server: ChildProcess?
    private var watchdog: ChildProcess?
    private var databases = 0
    private var stopped = false

    var dataDirectory: String { directory + "/data" }

    /// Its own cluster, for tests that kill or restart it.
    public static func start(_ setup: Setup = .trust) throws -> PostgresCluster {
        guard let binaries else { throw PostgresClusterError(missingMessage) }
        let cluster = try PostgresCluster(binaries: binaries, setup: setup)
        do {
            try cluster.initialize()
            try cluster.launchOnAFreePort()
        } catch {
            cluster.stop()
            throw error
        }
        return cluster
    }

    private static let sharedClusters = Mutex<[Setup: Result<PostgresCluster, PostgresClusterError>]>([:])

    /// One cluster of each setup for the whole test process, started on first use and
    /// stopped at exit. A failed start is remembered: every test that asks gets the same
    /// error, quickly.
    public static func shared(_ setup: Setup = .trust) throws -> PostgresCluster {
        let result = sharedClusters.withLock { clusters -> Result<PostgresCluster, PostgresClusterError> in
            if let known = clusters[setup] { return known }
            let started: Result<PostgresCluster, PostgresClusterError>
            do {
                started = .success(try start(setup))
                _ = stopSharedAtExit
            } catch let error as PostgresClusterError {
                started = .failure(error)
            } catch {
                started = .failure(PostgresClusterError("\(error)"))
            }
            clusters[setup] = started
            return started
        }
        return try result.get()
    }

    /// Registered with the first shared cluster that starts (a static is initialized once).
    private static let stopSharedAtExit: Void = { atexit { PostgresCluster.stopShared() } }()

    private static func stopShared() {
        for case .success(let cluster) in sharedClusters.withLock({ Array($0.values) }) { cluster.stop() }
    }

    /// Where clusters live: /dev/shm (memory) where it can be written, else /tmp. A test
    /// cluster's disk durability is never tested (crashes are SIGKILLs of the server, whose
    /// writes the kernel keeps), and on disk each CREATE DATABASE (one per test) and the
    /// removal of a shared cluster's few hundred megabytes at exit cost seconds, tens of
    /// them when other work loads the disk.
    static let parentDirectory = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp"

    private init(binaries: (initdb: String, postgres: String), setup: Setup) throws {
        self.binaries = binaries
        self.setup = setup
        superuserPassword = setup == .debian ? Self.randomPassword() : nil
        port = try Self.freePort()
        var owner: (uid: uid_t, gid: gid_t)?
        if geteuid() == 0 {
            guard let account = getpwnam("postgres") else {
                throw PostgresClusterError("running as root needs a `postgres` user to run the server as (Debian's postgresql package creates it)")
            }
            guard access("/usr/bin/setpriv", X_OK) == 0 else { throw PostgresClusterError("running as root needs /usr/bin/setpriv (util-linux)") }
            owner = (account.pointee.pw_uid, account.pointee.pw_gid)
        }
        var template = Array("\(Self.parentDirectory)/securepush-pg-XXXXXX".utf8CString)
        guard mkdtemp(&template) != nil else { throw PostgresClusterError("mkdtemp failed: \(String(cString: strerror(errno)))") }
        directory = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if let owner {
            guard chown(directory, owner.uid, owner.gid) == 0 else {
                rmdir(directory)
                throw PostgresClusterError("chown \(directory) failed: \(String(cString: strerror(errno)))")
            }
            user = "postgres"
            asServerUser = ["/usr/bin/setpriv", "--reuid=\(owner.uid)", "--regid=\(owner.gid)", "--init-groups", "--"]
        } else {
            user = getpwuid(geteuid()).flatMap { $0.pointee.pw_name.map { String(cString: $0) } } ?? "postgres"
            asServerUser = []
        }
        self.owner = owner
    }

    /// postgresql://USER@127.0.0.1:PORT/DATABASE (with `.debian`, USER:PASSWORD@)
    public func url(database: String = "postgres") -> String {
        let credentials = superuserPassword.map { "\(user):\($0)" } ?? user
        return "postgresql://\(credentials)@127.0.0.1:\(port)/\(database)"
    }

    /// A new empty database; its URL.
    public func createDatabase() throws -> String {
        let name = lock.withLock { () -> String in
            databases += 1
            return "test_\(databases)"
        }
        let admin = try PostgresBlockingConnection(url())
        try admin.execute("CREATE DATABASE \(name)")
        return url(database: name)
    }

    /// Runs `sql` as the cluster's superuser, connected to the `postgres` database; the
    /// text of each row's first column.
    @discardableResult
    public func administer(_ sql: String) throws -> [String] {
        let admin = try PostgresBlockingConnection(url())
        defer { admin.close() }
        let result = try admin.query(sql)
        return try result.rows.indices.map { row in
            try result.isNull(row, 0) ? "" : result.text(row, 0)
        }
    }

    /// SIGKILL for the postmaster and every server process, as a crash: clients see their
    /// connections drop at once, and nothing is shut down cleanly.
    public func kill() {
        guard let server = lock.withLock({ self.server }) else { return }
        // Stopped first so it forks no new backend while its children are listed.
        server.signal(SIGSTOP)
        let children = Self.children(of: server.pid)
        server.killHard()
        for child in children { Glibc.kill(child, SIGKILL) }
        // Gone (or zombies) before returning, so a restart finds no one attached to the old
        // shared memory.
        waitUntil(pollMilliseconds: 5) { !children.contains(where: Self.isRunning) }
    }

    /// Starts the server again on the same directory and port (after `kill()`: crash recovery).
    public func restart() throws {
        if let server = lock.withLock({ self.server }), !server.hasExited {
            throw PostgresClusterError("the server is still running")
        }
        try launch()
    }

    /// Immediate shutdown (SIGQUIT), SIGKILL if that takes over 10 s; removes the directory.
    /// Idempotent. Not a fast shutdown (SIGINT): its checkpoint writes and fsyncs every
    /// database the tests created (seconds for a shared cluster, tens under load) only for
    /// the directory to be removed.
    public func stop() {
        let (running, watching, first) = lock.withLock { () -> (ChildProcess?, ChildProcess?, Bool) in
            defer { stopped = true }
            return (server, watchdog, !stopped)
        }
        guard first else { return }
        if let running, !running.hasExited {
            running.signal(SIGQUIT)
            if running.wait(seconds: 10) == nil { kill() }
        }
        watching?.killHard()
        _ = try? ChildProcess.run(executable: "/bin/rm", arguments: ["-rf", directory], seconds: 30)
        // Released, so their deinit removes their output files (the server log).
        lock.lock()
        server = nil
        watchdog = nil
        lock.unlock()
    }

    /// What the server wrote to stderr (its log), for failure messages.
    public var serverLog: String { lock.withLock { server?.standardError } ?? "" }

    // MARK: starting

    private func initialize() throws {
        var arguments = asServerUser + [
            binaries.initdb, "-D", dataDirectory, "-U", user, "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync",
        ]
        if setup == .debian { arguments += try debianInitdbArguments() }
        let (status, _, errors) = try ChildProcess.run(executable: arguments[0], arguments: Array(arguments.dropFirst()), seconds: 120)
        guard status == 0 else { throw PostgresClusterError("initdb failed (status \(status)): \(errors)") }
        // initdb's file is replaced, keeping its owner.
        let hba: String
        switch setup {
        case .trust: hba = "# securepush tests: trust on loopback only\nhost all all 127.0.0.1/32 trust\n"
        case .debian:
            hba = Self.debianHBA
            try writeDebianCertificate()
            try writeDebianSettings()
        }
        guard Self.writeFile(dataDirectory + "/pg_hba.conf", hba) else { throw PostgresClusterError("cannot write pg_hba.conf") }
    }

    /// A port handed out free can still be taken by another process (another test run on
    /// the machine) before the server binds it: then the server is started on another.
    private func launchOnAFreePort() throws {
        for attempt in 1... {
            do {
                return try launch()
            } catch let error as PostgresClusterError where error.description.contains("Address already in use") && attempt < 5 {
                port = try Self.freePort()
            }
        }
    }

    private func launch() throws {
        let arguments = asServerUser + [
            binaries.postgres, "-D", dataDirectory, "-p", String(port),
            "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=\(directory)",
            "-c", "fsync=on", "-c", "synchronous_commit=on", "-c", "shared_buffers=16MB", "-c", "max_connections=200",
        ]
        let server: ChildProcess
        do {
            server = try ChildProcess(executable: arguments[0], arguments: Array(arguments.dropFirst()), name: "postgres")
        } catch {
            throw PostgresClusterError("cannot start postgres: \(error)")
        }
        lock.lock()
        self.server = server
        lock.unlock()
        startWatchdog(serverPid: server.pid)
        // Its own log says when it is ready: a port that accepts could be another server's.
        let ready = waitUntil(timeoutSeconds: 60, pollMilliseconds: 20) {
            server.hasExited || server.standardError.contains("database system is ready to accept connections")
        }
        if server.hasExited {
            throw PostgresClusterError("postgres exited (status \(server.exitStatus ?? -1)): \(server.standardError)")
        }
        guard ready else {
            server.killHard()
            throw PostgresClusterError("postgres did not accept connections within 60 s: \(server.standardErrorTail)")
        }
    }

    /// Stops the server (whichever postmaster the lock file names, after restarts) and
    /// removes the directory once this test process is gone without calling `stop()`.
    private func startWatchdog(serverPid: pid_t) {
        guard lock.withLock({ watchdog == nil }) else { return }
        let script = """
            while kill -0 \(getpid()) 2>/dev/null; do sleep 1; done
            pid=$(head -n 1 '\(dataDirectory)/postmaster.pid' 2>/dev/null)
            [ -n "$pid" ] && kill -INT "$pid" 2>/dev/null && sleep 5 && kill -KILL "$pid" 2>/dev/null
            rm -rf '\(directory)'
            """
        let started = try? ChildProcess(executable: "/bin/sh", arguments: ["-c", script], name: "postgres-watchdog")
        lock.lock()
        watchdog = started
        lock.unlock()
    }

    // MARK: helpers

    private static func findBinaries() -> (initdb: String, postgres: String)? {
        var candidates: [String] = []
        if let chosen = getenv("SECUREPUSH_POSTGRES_BINDIR") {
            candidates = [String(cString: chosen)]
        } else if let directory = opendir("/usr/lib/postgresql") {
            var versions: [Int] = []
            while let entry = readdir(directory) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
                }
                if let version = Int(name) { versions.append(version) }
            }
            closedir(directory)
            candidates += versions.sorted(by: >).map { "/usr/lib/postgresql/\($0)/bin" }
        }
        if getenv("SECUREPUSH_POSTGRES_BINDIR") == nil, let path = getenv("PATH") {
            candidates += String(cString: path).split(separator: ":").map(String.init)
        }
        for directory in candidates {
            let initdb = directory + "/initdb"
            let postgres = directory + "/postgres"
            if access(initdb, X_OK) == 0, access(postgres, X_OK) == 0 { return (initdb, postgres) }
        }
        return nil
    }

    private static func freePort() throws -> Int { try freeLoopbackPort() }

    /// Processes whose parent is `pid`, from /proc/N/stat ("N (comm) S PPID ...").
    private static func children(of pid: pid_t) -> [pid_t] {
        guard let proc = opendir("/proc") else { return [] }
        defer { closedir(proc) }
        var found: [pid_t] = []
        while let entry = readdir(proc) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard let candidate = pid_t(name), let fields = statFields(candidate), fields.count > 1,
                  pid_t(fields[1]) == pid else { continue }
            found.append(candidate)
        }
        return found
    }

    /// The fields after the command name in /proc/PID/stat: state, ppid, ...
    private static func statFields(_ pid: pid_t) -> [Substring]? {
        guard let text = readFile("/proc/\(pid)/stat"), let close = text.lastIndex(of: ")") else { return nil }
        return text[text.index(after: close)...].split(separator: " ")
    }

    private static func isRunning(_ pid: pid_t) -> Bool {
        guard let fields = statFields(pid), let state = fields.first else { return false }
        return state != "Z" && state != "X"
    }

    private static func readFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(fd, &chunk, chunk.count)
            guard count > 0 else { break }
            bytes += chunk[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func writeFile(_ path: String, _ text: String) -> Bool {
        let fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == bytes.count
    }
}

/// A pthread mutex: Synchronization's Mutex wants `sending` results, and ChildProcess is not
/// Sendable.
private final class PlainLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    init() { pthread_mutex_init(mutex, nil) }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }

    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }
}
