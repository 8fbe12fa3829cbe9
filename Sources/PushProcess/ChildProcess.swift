#if canImport(Glibc)
import Glibc
#endif
import PushClock
import Synchronization

/// A child process (in practice the `securepush` executable running a service or a
/// command), started with posix_spawn and reaped with waitpid: no run loop, no SIGCHLD
/// handler, so many of them can run from many threads at once. Its stdin comes from a
/// file or /dev/null and its stdout and stderr go to files, because a pipe nobody drains
/// blocks a long-running service once it is full.
public final class ChildProcess {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
        init(_ description: String) { self.description = description }
    }

    public let pid: pid_t
    public let name: String
    public let stdoutPath: String
    public let stderrPath: String
    private let temporaryPaths: [String]
    public private(set) var exitStatus: Int32?

    /// The executable of the current process, to start services from the same build.
    public static var currentExecutable: String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return CommandLine.arguments[0] }
        return String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The write end of the child's stdin when it was started with `stdinPipe`.
    public private(set) var stdinWriter: Int32 = -1

    /// - Parameter stdinText: written to a temporary file that becomes the child's stdin.
    /// - Parameter stdinPipe: the child reads its stdin from a pipe the parent writes with
    ///   `writeStandardInput` (a client driven line by line); ignored with `stdinText`.
    public init(executable: String, arguments: [String], name: String? = nil, stdinText: String? = nil,
                stdinPipe: Bool = false) throws(Failure) {
        let stem = "/tmp/securepush-child-\(getpid())-\(ChildProcess.nextSerial())"
        stdoutPath = stem + ".out"
        stderrPath = stem + ".err"
        var temporary = [stdoutPath, stderrPath]
        var stdinPath = "/dev/null"
        if let stdinText {
            stdinPath = stem + ".in"
            temporary.append(stdinPath)
            guard ChildProcess.writeFile(stdinPath, stdinText) else { throw Failure("cannot write \(stdinPath)") }
        }
        temporaryPaths = temporary
        self.name = name ?? arguments.first ?? executable

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var pipeEnds: [Int32] = [-1, -1]
        if stdinPipe, stdinText == nil {
            guard pipe(&pipeEnds) == 0 else { throw Failure("cannot make a pipe: \(String(cString: strerror(errno)))") }
            // Other children started meanwhile must not hold the pipe open; dup2 clears
            // the flag on the child's own stdin.
            _ = fcntl(pipeEnds[0], F_SETFD, FD_CLOEXEC)
            _ = fcntl(pipeEnds[1], F_SETFD, FD_CLOEXEC)
            posix_spawn_file_actions_adddup2(&actions, pipeEnds[0], 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, stdinPath, O_RDONLY, 0)
        }
        defer { if pipeEnds[0] >= 0 { Glibc.close(pipeEnds[0]) } }
        posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // The child starts with nothing blocked and default dispositions: a test runner's
        // thread may block SIGTERM, and an ignored SIGPIPE would otherwise be inherited.
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGTERM, SIGINT] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var child = pid_t()
        let result = posix_spawn(&child, executable, &actions, &attributes, argv, environ)
        guard result == 0 else {
            if pipeEnds[1] >= 0 { Glibc.close(pipeEnds[1]) }
            temporary.forEach { unlink($0) }
            throw Failure("cannot start \(executable): \(String(cString: strerror(result)))")
        }
        pid = child
        stdinWriter = pipeEnds[1]
        OrphanGuard.watch(child)
    }

    /// Writes to the child's stdin pipe; false when there is none or the child closed it.
    @discardableResult
    public func writeStandardInput(_ text: String) -> Bool {
        guard stdinWriter >= 0 else { return false }
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { Glibc.write(stdinWriter, $0.baseAddress, $0.count) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { return false }
            bytes = bytes.dropFirst(written)
        }
        return true
    }

    /// Closes the child's stdin pipe: it reads end of file.
    public func closeStandardInput() {
        guard stdinWriter >= 0 else { return }
        Glibc.close(stdinWriter)
        stdinWriter = -1
    }

    deinit {
        closeStandardInput()
        if exitStatus == nil { terminate(graceSeconds: 5) }
        temporaryPaths.forEach { unlink($0) }
    }

    /// Whether the child has exited (reaped without blocking).
    public var hasExited: Bool {
        if exitStatus != nil { return true }
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return false }
        exitStatus = ChildProcess.decode(status)
        return true
    }

    /// Waits up to `seconds` for the child to exit; its exit status, or nil.
    public func wait(seconds: Double) -> Int32? {
        let deadline = ChildProcess.now() + seconds
        while !hasExited {
            guard ChildProcess.now() < deadline else { return nil }
            usleep(2_000)
        }
        return exitStatus
    }

    public func signal(_ signal: Int32) {
        if !hasExited { kill(pid, signal) }
    }

    /// SIGKILL, and reap it.
    public func killHard() {
        guard !hasExited else { return }
        kill(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        exitStatus = ChildProcess.decode(status)
    }

    /// SIGTERM, then SIGKILL if it has not exited after `graceSeconds`; the exit status.
    @discardableResult
    public func terminate(graceSeconds: Double) -> Int32? {
        guard !hasExited else { return exitStatus }
        kill(pid, SIGTERM)
        if let status = wait(seconds: graceSeconds) { return status }
        killHard()
        return exitStatus
    }

    public var standardOutput: String { ChildProcess.readFile(stdoutPath) }
    public var standardError: String { ChildProcess.readFile(stderrPath) }

    /// Waits for a stdout line starting with `prefix` (e.g. `listening on `) and returns
    /// the rest of it; fails if the child exits first or `seconds` pass.
    public func waitForLine(prefix: String, seconds: Double) throws(Failure) -> String {
        let deadline = ChildProcess.now() + seconds
        while true {
            for line in standardOutput.split(separator: "\n") where line.hasPrefix(prefix) {
                return String(line.dropFirst(prefix.count))
            }
            if hasExited { throw Failure("\(name) exited (status \(exitStatus ?? -1)) before it was ready: \(standardErrorTail)") }
            guard ChildProcess.now() < deadline else {
                terminate(graceSeconds: 2)
                throw Failure("\(name) did not print `\(prefix)` within \(Int(seconds)) s: \(standardErrorTail)")
            }
            usleep(5_000)
        }
    }

    /// The last lines of stderr, for error messages.
    public var standardErrorTail: String {
        let lines = standardError.split(separator: "\n").suffix(3).joined(separator: " | ")
        return lines.isEmpty ? "(no output)" : lines
    }

    /// Runs a command to completion and returns its exit status and output.
    public static func run(executable: String, arguments: [String], stdinText: String? = nil,
                           seconds: Double = 120) throws(Failure) -> (status: Int32, stdout: String, stderr: String) {
        let child = try ChildProcess(executable: executable, arguments: arguments, stdinText: stdinText)
        guard let status = child.wait(seconds: seconds) else {
            child.killHard()
            throw Failure("\(child.name) did not finish within \(Int(seconds)) s")
        }
        return (status, child.standardOutput, child.standardError)
    }

    // MARK: helpers

    private static func decode(_ status: Int32) -> Int32 {
        // WIFEXITED / WEXITSTATUS / WTERMSIG are macros Swift does not import.
        let signal = status & 0x7F
        return signal == 0 ? (status >> 8) & 0xFF : 128 + signal
    }

    private static func now() -> Double {
        Double(Clocks.monotonicNanoseconds()) / 1e9
    }

    private static let serial = Atomic<Int>(0)

    /// Unique per child of this process, for its temporary file names.
    private static func nextSerial() -> Int {
        serial.add(1, ordering: .relaxed).newValue
    }

    static func readFile(_ path: String) -> String {
        guard let file = fopen(path, "r") else { return "" }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = fread(&chunk, 1, chunk.count, file)
            if count <= 0 { break }
            bytes += chunk[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func writeFile(_ path: String, _ text: String) -> Bool {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == bytes.count
    }
}
