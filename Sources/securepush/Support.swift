import ArgumentParser
import Logging
import PushEventLoop
import PushSecurity
import PushService
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

enum LogFormatOption: String, ExpressibleByArgument, CaseIterable {
    /// `TIMESTAMP LEVEL LABEL: key=value [module] message`, swift-log's stream format.
    case text
    /// One JSON object per line (`JSONLogHandler`).
    case json
}

/// Structured logs on stderr; stdout stays for what scripts read.
func makeLogger(_ label: String, level: LogLevelOption, format: LogFormatOption = .text) -> Logger {
    var logger = switch format {
    case .text: Logger(label: label) { StreamLogHandler.standardError(label: $0) }
    case .json: Logger(label: label) { JSONLogHandler(label: $0) }
    }
    logger.logLevel = level.level
    return logger
}

/// The logger of a service: each setting from its flag, else from the config file
/// (`SERVICE.log_level`, then the bare `log_level`; the same for `log_format`; both
/// checked by `ConfigSchema` when the deployment opened), else info and text.
func serviceLogger(_ service: ConfigService, deployment: Deployment, level: LogLevelOption?, format: LogFormatOption?) -> Logger {
    let level = level ?? deployment.value("log_level", for: service).flatMap(LogLevelOption.init(rawValue:)) ?? .info
    let format = format ?? deployment.value("log_format", for: service).flatMap(LogFormatOption.init(rawValue:)) ?? .text
    return makeLogger("securepush.\(service.rawValue)", level: level, format: format)
}

/// Where a service serves /metrics, /healthz and /readyz: the flag, else `SERVICE.metrics`
/// in the config file (no bare key: two services cannot share one port), else nowhere.
func monitoringAddress(_ flag: HostPort?, service: ConfigService, deployment: Deployment) throws -> HostPort? {
    if let flag { return flag }
    guard let text = deployment.config[service.rawValue + ".metrics"] else { return nil }
    guard let address = HostPort(argument: text) else {
        throw CommandFailure("\(deployment.directory)/\(Deployment.configFile): \(service.rawValue).metrics must be HOST:PORT, not '\(text)'")
    }
    return address
}

/// Adds the process and build metrics to a service's registry and serves it with the
/// health endpoints, announcing the address on stdout (tests and scripts wait for it).
func startMonitoring(_ metrics: MetricsRegistry, at address: HostPort,
                     start: (String, Int) throws(EventLoopError) -> MonitoringEndpoint) throws -> MonitoringEndpoint {
    if !metrics.contains("securepush_build_info") {
        metrics.addBuildInfo(version: SecurePush.version)
        metrics.addProcessMetrics()
    }
    let endpoint: MonitoringEndpoint
    do {
        endpoint = try start(address.host, address.port)
    } catch {
        throw CommandFailure("metrics endpoint: cannot listen on \(address): \(error)")
    }
    announce("metrics on \(HostPort(host: address.host, port: endpoint.port))")
    return endpoint
}

/// `listening on HOST:PORT` as given (scripts and tests wait for that line), then, when the
/// host resolved to more than one address, every address bound.
func announceListening(on address: HostPort, addresses: [String]) {
    announce("listening on \(address)")
    if addresses.count > 1 { announce("addresses: \(addresses.joined(separator: " "))") }
}

/// Runs a service's loops on `loop` until SIGTERM or SIGINT drains them: the monitoring
/// endpoint when one is asked for, the listening announcement, and `placement` logged when
/// there are several loops (how connections are placed on them). Then stops everything.
func serveUntilStopped<Member>(_ service: ServiceLoopGroup<Member>, on loop: EventLoop, listen address: HostPort,
                               monitoring: HostPort?, logger: Logger, placement: String) throws {
    let endpoint = try monitoring.map { address in
        try startMonitoring(service.metrics, at: address) { host, port throws(EventLoopError) in
            try service.startMonitoring(host: host, port: port)
        }
    }
    let signals = stopOnTermination(loop) { stopped in service.drain(then: stopped) }
    announceListening(on: HostPort(host: address.host, port: service.port), addresses: service.listeningAddresses)
    if service.loopCount > 1 { logger.info("serving on \(service.loopCount) loop threads; \(placement)") }
    loop.run()
    signals.forEach { $0.cancel() }
    endpoint?.stop()
    service.shutdown()
    loop.shutdown()
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

/// Writes a line to stdout with write(2), past stdio. For a command that reads stdin on
/// another thread: `fflush(nil)` in `announce` takes every stream's lock, stdin's too,
/// which that thread holds while it waits for a line, so the loop would stop until one came.
func writeStandardOutputLine(_ line: String) {
    var bytes = Array((line + "\n").utf8)[...]
    while !bytes.isEmpty {
        let written = bytes.withUnsafeBytes { write(STDOUT_FILENO, $0.baseAddress, $0.count) }
        if written < 0, errno == EINTR { continue }
        guard written > 0 else { return }
        bytes = bytes.dropFirst(written)
    }
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
