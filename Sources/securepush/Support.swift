import ArgumentParser
import Logging
import PushEventLoop
#if canImport(Glibc)
import Glibc
#endif

/// A command-line failure: one line on stderr and a non-zero exit, never a stack trace.
struct CommandFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// `HOST:PORT`, with IPv6 hosts in brackets.
extension HostPort: ExpressibleByArgument {
    public init?(argument: String) { self.init(parsing: argument) }
}

enum LogLevelOption: String, ExpressibleByArgument, CaseIterable {
    case trace, debug, info, notice, warning, error, critical
    var level: Logger.Level { Logger.Level(rawValue: rawValue) ?? .info }
}

/// Structured logs on stderr; stdout stays for what scripts read.
func makeLogger(_ label: String, level: LogLevelOption) -> Logger {
    var logger = Logger(label: label) { StreamLogHandler.standardError(label: $0) }
    logger.logLevel = level.level
    return logger
}

/// Prints a line to stdout and flushes it at once: tests and scripts wait for it.
func announce(_ line: String) {
    print(line)
    fflush(nil)  // nil flushes every stream, stdout included, without naming the global
}

/// Reads a password from stdin: with the echo off at a terminal, else the first line.
func readPassword(prompt: String) throws -> [UInt8] {
    var password: [UInt8]
    if isatty(STDIN_FILENO) == 1 {
        writeStandardError(prompt)
        var saved = termios()
        tcgetattr(STDIN_FILENO, &saved)
        var silent = saved
        silent.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(STDIN_FILENO, TCSANOW, &silent)
        defer {
            tcsetattr(STDIN_FILENO, TCSANOW, &saved)
            writeStandardError("\n")
        }
        password = Array((readLine(strippingNewline: true) ?? "").utf8)
    } else {
        password = Array((readLine(strippingNewline: true) ?? "").utf8)
    }
    guard !password.isEmpty else { throw CommandFailure("empty password") }
    guard password.count <= 256 else { throw CommandFailure("password longer than 256 bytes") }
    return password
}

func writeStandardError(_ text: String) {
    let bytes = Array(text.utf8)
    _ = bytes.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
}


/// Stops a service gracefully on SIGTERM or SIGINT: the first one calls `stop`, which
/// calls back when the service has drained, and the loop then stops. Watched before
/// the signals are unblocked, so one that arrives early is not fatal.
func stopOnTermination(_ loop: EventLoop, stop: @escaping (_ stopped: @escaping () -> Void) -> Void) -> [SignalHandler] {
    var stopping = false
    let begin = {
        guard !stopping else { return }
        stopping = true
        stop { loop.stop() }
    }
    let handlers = [loop.onSignal(SIGTERM, begin), loop.onSignal(SIGINT, begin)]
    unblockTerminationSignals()
    return handlers
}

/// A parent may start us with SIGTERM and SIGINT blocked (threads of a test runner often
/// block them, and the mask is inherited); a service must hear them to stop gracefully.
func unblockTerminationSignals() {
    var set = sigset_t()
    sigemptyset(&set)
    sigaddset(&set, SIGTERM)
    sigaddset(&set, SIGINT)
    pthread_sigmask(SIG_UNBLOCK, &set, nil)
}
