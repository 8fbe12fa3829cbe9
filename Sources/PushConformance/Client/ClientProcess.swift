#if canImport(Glibc)
import Glibc
#endif
import PushClock
import PushProcess

/// A client under test as a running process: started from its command line, its stdout
/// read line by line as it grows (the harness polls it from its loop), stopped with
/// SIGTERM and then SIGKILL (SPEC Appendix B.1).
final class ClientProcess {
    let child: ChildProcess
    private let stdout: Int32
    private var pending: [UInt8] = []
    /// Every complete line so far, with when the harness read it.
    private(set) var lines: [(text: String, atMs: Int64)] = []
    let startedAtMs: Int64

    /// - Parameter stdinPipe: a provider reads its commands from stdin; a device's is /dev/null.
    init(arguments: [String], stdinPipe: Bool) throws(CaseStop) {
        do {
            child = try ChildProcess(executable: arguments[0], arguments: Array(arguments.dropFirst()),
                                     name: "client", stdinPipe: stdinPipe)
        } catch {
            throw .fail("cannot start the client: \(error)")
        }
        startedAtMs = Clocks.monotonicMilliseconds()
        stdout = open(child.stdoutPath, O_RDONLY | O_CLOEXEC)
    }

    deinit {
        stop()
        if stdout >= 0 { close(stdout) }
    }

    /// Reads what the client wrote since the last call; the new complete lines.
    @discardableResult
    func poll() -> ArraySlice<(text: String, atMs: Int64)> {
        let before = lines.count
        guard stdout >= 0 else { return lines[before...] }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(stdout, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            pending += buffer[..<count]
        }
        let now = Clocks.monotonicMilliseconds()
        while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
            var line = Array(pending[..<newline])
            if line.last == UInt8(ascii: "\r") { line.removeLast() }
            lines.append((String(decoding: line, as: UTF8.self), now))
            pending.removeSubrange(...newline)
        }
        return lines[before...]
    }

    /// Writes one command line to the client's stdin.
    func send(_ line: String) -> Bool { child.writeStandardInput(line + "\n") }

    /// End of file on the client's stdin.
    func closeInput() { child.closeStandardInput() }

    var hasExited: Bool { child.hasExited }
    var exitStatus: Int32? { child.exitStatus }

    /// SIGTERM, then SIGKILL after two seconds; reaped.
    func stop() {
        guard !child.hasExited else { return }
        _ = child.terminate(graceSeconds: 2)
    }

    /// SIGKILL at once, as a crash or a phone killing the app.
    func kill() {
        guard !child.hasExited else { return }
        child.killHard()
    }

    /// The last lines of its stderr, for a FAIL's detail.
    var standardErrorTail: String { child.standardErrorTail }
}
