import ArgumentParser
import PushBench
import PushEventLoop

/// `securepush bench SCENARIO [flags]`. The scenario's flags are parsed here rather than
/// by subcommands so that a bad flag is one line on stderr and a non-zero exit (a
/// subcommand's parse error would print its whole usage too).
struct BenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Load tests; results go to stdout as a table or, with --json, one JSON object.",
        discussion: """
        securepush bench SCENARIO [flags]; `securepush bench SCENARIO --help` lists the flags.

        Scenarios:
          echo          framed echo over loopback through the event loop (no services)
        \(Scenario.allCases.map { "  " + $0.rawValue.padding(12) + "  " + $0.summary }.joined(separator: "\n"))

        By default (--embedded) the bench starts its own store and gateway as child processes
        in a temporary deployment and removes it afterwards. With --store/--gateway it loads
        running services instead; --data-dir names their deployment, whose keys sign the
        bench's credentials, and it adds a throwaway user there (removed afterwards) unless
        --user names an existing one (with --password-file for e2e's device logins).
        """)

    @Argument(parsing: .captureForPassthrough, help: "The scenario, then its flags.")
    var arguments: [String] = []

    func run() throws {
        guard let name = arguments.first else {
            throw CommandFailure("name a scenario: echo, " + Scenario.allCases.map(\.rawValue).joined(separator: ", "))
        }
        let rest = Array(arguments.dropFirst())
        // The passthrough argument captures --help too.
        if ["--help", "-h", "help"].contains(name) {
            print(BenchCommand.helpMessage())
            return
        }
        if name == "echo" {
            try parseOrExplain(EchoOptions.self, rest).run()
            return
        }
        guard let scenario = Scenario(rawValue: name) else {
            throw CommandFailure("unknown scenario \(name.debugDescription); one of echo, "
                                 + Scenario.allCases.map(\.rawValue).joined(separator: ", "))
        }
        let options = try parseOrExplain(ScenarioOptions.self, rest)
        let benchmark = try options.benchmark(for: scenario)
        let report: BenchReport
        do {
            report = try benchmark.run()
        } catch {
            throw CommandFailure("bench \(scenario.rawValue): \(error)")
        }
        print(options.json ? report.json : report.text)
    }

    /// Parses `arguments`; `--help` prints the help and exits 0, anything wrong is one line.
    private func parseOrExplain<T: ParsableArguments>(_ type: T.Type, _ arguments: [String]) throws -> T {
        do {
            return try T.parse(arguments)
        } catch {
            if T.exitCode(for: error) == .success {
                print(T.fullMessage(for: error))
                throw ExitCode.success
            }
            throw CommandFailure(T.message(for: error).split(separator: "\n").first.map(String.init) ?? "bad arguments")
        }
    }
}

/// The flags every load scenario shares; each one given replaces the scenario's default.
struct ScenarioOptions: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "securepush bench SCENARIO")

    @Flag(help: "Start a store and gateway for the run in a temporary deployment (the default).") var embedded = false
    @Option(help: "A running store, HOST:PORT (with --data-dir).") var store: String?
    @Option(help: "A running gateway, HOST:PORT (with --data-dir).") var gateway: String?
    @Option(help: "The running services' deployment directory; its keys sign the bench's credentials.") var dataDir: String?
    @Option(help: "An existing user to store for (default: a throwaway user added and removed by the bench).") var user: String?
    @Option(help: "The --user's password, first line of this file (e2e devices LOGIN with it).") var passwordFile: String?
    @Option(help: "The gateway process for `connections` (default: found from its port).") var gatewayPid: Int32?

    @Option(help: "Load-generating connections (providers; devices for fetch; idle devices for connections).") var connections: Int?
    @Option(help: "Devices that receive pushes (push, fanout, e2e).") var devices: Int?
    @Option(help: "Requests in flight per connection (closed loop; fanout defaults to --rate 2).") var inflight: Int?
    @Option(help: "Operations per second, open loop; latency counts from each one's intended start.") var rate: Double?
    @Option(help: "Seconds measured (connections: seconds held before memory is read).") var duration: Double?
    @Option(help: "Operations measured (instead of --duration).") var count: Int?
    @Option(help: "Payload bytes per STORE.") var payloadSize: Int?
    @Option(help: "Seconds of load before measuring.") var warmup: Double?
    @Flag(help: "Print one JSON object instead of a table.") var json = false
    @Flag(help: "No live progress line on stderr (it is drawn only on a terminal anyway).") var noProgress = false

    func benchmark(for scenario: Scenario) throws -> LoadBenchmark {
        var shape = scenario.defaultShape
        if let connections { shape.connections = connections }
        if let devices { shape.devices = devices }
        if scenario == .connections { shape.devices = shape.connections }
        if inflight != nil, rate != nil { throw CommandFailure("--inflight (closed loop) and --rate (open loop) exclude each other") }
        if let inflight {
            shape.inflight = inflight
            shape.rate = nil
        }
        if let rate { shape.rate = rate }
        switch (duration, count) {
        case (.some, .some): throw CommandFailure("--duration and --count exclude each other")
        case (let seconds?, nil): shape.stop = .duration(seconds)
        case (nil, let count?): shape.stop = .count(count)
        case (nil, nil): break
        }
        if let payloadSize { shape.payloadSize = payloadSize }
        if let warmup { shape.warmupSeconds = warmup }
        do {
            try shape.validate()
        } catch {
            throw CommandFailure(error.description)
        }

        var target = TargetOptions()
        if embedded, store != nil || gateway != nil { throw CommandFailure("--embedded excludes --store and --gateway") }
        target.store = try store.map { try endpoint($0, flag: "--store") }
        target.gateway = try gateway.map { try endpoint($0, flag: "--gateway") }
        target.dataDirectory = dataDir
        target.user = user
        target.passwordFile = passwordFile
        target.gatewayPID = gatewayPid
        return LoadBenchmark(scenario: scenario, shape: shape, target: target, showProgress: !noProgress)
    }

    private func endpoint(_ text: String, flag: String) throws -> HostPort {
        guard let endpoint = HostPort(parsing: text), endpoint.port != 0 else { throw CommandFailure("\(flag) must be HOST:PORT, not \(text.debugDescription)") }
        return endpoint
    }
}

/// `bench echo`: the event loop alone, client and server threads in this process.
struct EchoOptions: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "securepush bench echo")

    @Option(help: "Frames kept in flight on the one connection.") var inflight = 64
    @Option(help: "Body bytes per frame (the 16-byte header comes on top).") var payloadSize = 16
    @Option(help: "Seconds measured.") var duration = 5.0
    @Option(help: "Seconds run before measuring.") var warmup = 1.0
    @Flag(help: "Print one JSON object instead of a table.") var json = false

    func run() throws {
        guard (1...100_000).contains(inflight) else { throw CommandFailure("--inflight must be 1 to 100000") }
        guard (0...60_000).contains(payloadSize) else { throw CommandFailure("--payload-size must be 0 to 60000") }
        guard duration > 0, duration <= 600, warmup >= 0, warmup <= 60 else {
            throw CommandFailure("--duration must be in (0, 600] and --warmup in [0, 60]")
        }
        let report = try EchoBenchmark(inflight: inflight, payloadSize: payloadSize, warmupSeconds: warmup, durationSeconds: duration).run()
        print(json ? report.json : report.text)
    }
}

private extension String {
    func padding(_ width: Int) -> String { count >= width ? self : self + String(repeating: " ", count: width - count) }
}
