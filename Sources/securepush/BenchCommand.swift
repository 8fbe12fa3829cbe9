import ArgumentParser
import PushBench
import PushEventLoop
import PushSecurity
import PushWire

/// `securepush bench SCENARIO [flags]`: one subcommand per scenario, each listing only the
/// flags it reads, with that scenario's defaults.
struct BenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Load tests, one scenario per subcommand; results on stdout as a table or one JSON object.",
        discussion: """
        The load scenarios start their own store and gateway as child processes in a \
        temporary deployment (removed afterwards), unless --store or --gateway name \
        running services: then --data-dir names their deployment, whose keys sign the \
        bench's credentials, and --ca-file verifies them when they serve TLS.

        Latencies are in microseconds. --hdr-out writes the whole latency distribution \
        in HdrHistogram's .hgrm format and --plot draws its percentile curve as an SVG \
        image. The exit status is 1 when any operation failed (an ERROR reply, a \
        timeout, a lost or refused connection): the report is still printed and \
        written, and one line on stderr names the failures.

        push, fanout and e2e load a gateway cluster too: running nodes as --gateway \
        A,B,C, or --gateways N embedded ones joined over a nats-server the bench starts \
        (Debian's nats-server package); devices and provider connections are spread \
        over the gateways in turn. Their reports give cpu_us_per_delivery, the CPU of \
        every gateway and of nats-server per device reached, and in a cluster run \
        nats_in_msgs_per_push and nats_out_msgs_per_push from nats-server's /varz.

        `securepush bench SCENARIO --help` lists a scenario's flags and defaults.
        """,
        subcommands: [BenchEcho.self, BenchStore.self, BenchFetch.self, BenchPush.self, BenchFanout.self, BenchE2E.self,
                      BenchConnections.self, BenchHTTP.self])
}

// MARK: - Scenarios

struct BenchEcho: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "echo", abstract: "Framed echo over loopback through the event loop alone (no services).")

    @Option(help: ArgumentHelp("Frames kept in flight on the one connection.", valueName: "n")) var inflight = 64
    @Option(help: ArgumentHelp("Body bytes per frame; the 16-byte header comes on top.", valueName: "bytes")) var payloadSize = 16
    @Option(help: ArgumentHelp("Seconds measured.", valueName: "s")) var duration = 5.0
    @Option(help: ArgumentHelp("Seconds run before measuring.", valueName: "s")) var warmup = 1.0
    @OptionGroup(title: "Output") var output: ReportFlags

    func run() throws {
        guard (1...100_000).contains(inflight) else { throw CommandFailure("--inflight must be 1 to 100000") }
        guard (0...60_000).contains(payloadSize) else { throw CommandFailure("--payload-size must be 0 to 60000") }
        guard duration > 0, duration <= 600, warmup >= 0, warmup <= 60 else {
            throw CommandFailure("--duration must be in (0, 600] and --warmup in [0, 60]")
        }
        var report: BenchReport
        do {
            report = try EchoBenchmark(inflight: inflight, payloadSize: payloadSize, warmupSeconds: warmup, durationSeconds: duration).run()
        } catch {
            throw CommandFailure("bench echo: \(error)")
        }
        report.version = SecurePush.version
        try output.deliver(report)
    }
}

struct BenchStore: LoadScenarioCommand {
    static let scenario = Scenario.store
    static let configuration = CommandConfiguration(commandName: "store", abstract: scenario.summary)

    @OptionGroup(title: "Load") var load: Load
    @OptionGroup(title: "Services (default: embedded)") var services: StoreServiceFlags
    @OptionGroup(title: "Output") var output: LoadOutputFlags

    struct Load: ParsableArguments {
        @Option(help: ArgumentHelp("Provider connections sending STOREs.", valueName: "n")) var connections = Scenario.store.defaultShape.connections
        @Option(help: ArgumentHelp("Payload bytes per STORE.", valueName: "bytes")) var payloadSize = Scenario.store.defaultShape.payloadSize
        @Flag(help: ArgumentHelp("""
            SENDs instead of STOREs: each commits its payload and a push to an enrolled device that never connects, which \
            the store hands to a gateway (the protocol's counterpart of `bench http`; a --store must run with --gateway; \
            embedded stores are started so).
            """))
        var send = false
        @OptionGroup var pace: PaceFlags<BenchStore>
    }

    func shape() throws -> LoadShape {
        var shape = try load.pace.shape(connections: load.connections)
        shape.payloadSize = load.payloadSize
        return shape
    }

    func target() throws -> TargetOptions {
        var target = try services.target()
        target.bySend = load.send
        return target
    }
}

struct BenchFetch: LoadScenarioCommand {
    static let scenario = Scenario.fetch
    static let configuration = CommandConfiguration(commandName: "fetch", abstract: scenario.summary)

    @OptionGroup(title: "Load") var load: Load
    @OptionGroup(title: "Services (default: embedded)") var services: StoreServiceFlags
    @OptionGroup(title: "Output") var output: LoadOutputFlags

    struct Load: ParsableArguments {
        @Option(help: ArgumentHelp("Device connections sending FETCHes, each with its own fetch token.", valueName: "n"))
        var connections = Scenario.fetch.defaultShape.connections
        @Option(help: ArgumentHelp("Bytes of each payload, stored before the run and fetched in it.", valueName: "bytes"))
        var payloadSize = Scenario.fetch.defaultShape.payloadSize
        @OptionGroup var pace: PaceFlags<BenchFetch>
    }

    func shape() throws -> LoadShape {
        var shape = try load.pace.shape(connections: load.connections)
        shape.payloadSize = load.payloadSize
        shape.devices = load.connections
        return shape
    }

    func target() throws -> TargetOptions { try services.target() }
}

struct BenchPush: LoadScenarioCommand {
    static let scenario = Scenario.push
    static let configuration = CommandConfiguration(commandName: "push", abstract: scenario.summary)

    @OptionGroup(title: "Load") var load: Load
    @OptionGroup(title: "Services (default: embedded)") var services: GatewayServiceFlags
    @OptionGroup(title: "Embedded gateways") var cluster: EmbeddedGatewayFlags
    @OptionGroup(title: "Output") var output: LoadOutputFlags

    struct Load: ParsableArguments {
        @Option(help: ArgumentHelp("Provider connections sending PUSHes.", valueName: "n")) var connections = Scenario.push.defaultShape.connections
        @Option(help: ArgumentHelp("Connected devices; each PUSH goes to the next one.", valueName: "n")) var devices = Scenario.push.defaultShape.devices
        @OptionGroup var pace: PaceFlags<BenchPush>
    }

    func shape() throws -> LoadShape {
        var shape = try load.pace.shape(connections: load.connections)
        shape.devices = load.devices
        return shape
    }

    func target() throws -> TargetOptions {
        var target = try services.target()
        cluster.apply(to: &target)
        return target
    }
}

struct BenchFanout: LoadScenarioCommand {
    static let scenario = Scenario.fanout
    static let configuration = CommandConfiguration(commandName: "fanout", abstract: scenario.summary)

    @OptionGroup(title: "Load") var load: Load
    @OptionGroup(title: "Services (default: embedded)") var services: GatewayServiceFlags
    @OptionGroup(title: "Embedded gateways") var cluster: EmbeddedGatewayFlags
    @OptionGroup(title: "Output") var output: LoadOutputFlags

    struct Load: ParsableArguments {
        @Option(help: ArgumentHelp("Provider connections sending PUSHes to the tag.", valueName: "n"))
        var connections = Scenario.fanout.defaultShape.connections
        @Option(help: ArgumentHelp("Connected devices with the tag; an operation ends when the last one has the PUSH.", valueName: "n"))
        var devices = Scenario.fanout.defaultShape.devices
        @OptionGroup var pace: PaceFlags<BenchFanout>
    }

    func shape() throws -> LoadShape {
        var shape = try load.pace.shape(connections: load.connections)
        shape.devices = load.devices
        return shape
    }

    func target() throws -> TargetOptions {
        var target = try services.target()
        cluster.apply(to: &target)
        return target
    }
}

struct BenchE2E: LoadScenarioCommand {
    static let scenario = Scenario.e2e
    static let configuration = CommandConfiguration(commandName: "e2e", abstract: scenario.summary)

    @OptionGroup(title: "Load") var load: Load
    @OptionGroup(title: "Services (default: embedded)") var services: BothServicesFlags
    @OptionGroup(title: "Embedded gateways") var cluster: EmbeddedGatewayFlags
    @OptionGroup(title: "Output") var output: LoadOutputFlags

    struct Load: ParsableArguments {
        @Option(help: ArgumentHelp("Provider connections, each to the store and to the gateway.", valueName: "n"))
        var connections = Scenario.e2e.defaultShape.connections
        @Option(help: ArgumentHelp("Devices, each connected to the gateway and to the store; PUSHes go to them in turn.", valueName: "n"))
        var devices = Scenario.e2e.defaultShape.devices
        @Option(help: ArgumentHelp("Payload bytes per STORE.", valueName: "bytes")) var payloadSize = Scenario.e2e.defaultShape.payloadSize
        @Flag(help: ArgumentHelp("""
            One SEND to the store per operation, which pushes itself (a --store must run with --gateway; embedded \
            stores are started so), instead of STORE to the store and then PUSH to the gateway.
            """))
        var send = false
        @Flag(help: ArgumentHelp("""
            Seal every payload to its device's key (SPEC.md 7.6): each device registers a key pair with its LOGIN, the \
            provider seals before its STORE or SEND, the device opens what it fetched; reports the microseconds per \
            seal and per open.
            """))
        var sealed = false
        @Option(help: ArgumentHelp("The devices' key suite with --sealed: x25519 or xwing.", valueName: "suite"))
        var keySuite = "x25519"
        @OptionGroup var pace: PaceFlags<BenchE2E>
    }

    func shape() throws -> LoadShape {
        var shape = try load.pace.shape(connections: load.connections)
        shape.devices = load.devices
        shape.payloadSize = load.payloadSize
        return shape
    }

    func target() throws -> TargetOptions {
        var target = try services.target()
        cluster.apply(to: &target)
        target.bySend = load.send
        if load.sealed {
            guard let suite = KeySuite(name: load.keySuite) else {
                throw ValidationError("--key-suite takes x25519 or xwing, not \(load.keySuite.debugDescription)")
            }
            target.sealedSuite = suite
        } else if load.keySuite != "x25519" {
            throw ValidationError("--key-suite is for --sealed")
        }
        return target
    }
}

struct BenchConnections: LoadScenarioCommand {
    static let scenario = Scenario.connections
    static let configuration = CommandConfiguration(commandName: "connections", abstract: scenario.summary)

    @OptionGroup(title: "Load") var load: Load
    @OptionGroup(title: "Services (default: embedded)") var services: GatewayServiceFlags
    @OptionGroup(title: "Output") var output: LoadOutputFlags

    struct Load: ParsableArguments {
        @Option(help: ArgumentHelp("Idle device connections to open and hold.", valueName: "n"))
        var connections = Scenario.connections.defaultShape.connections
        @Option(help: ArgumentHelp("Seconds the connections are held before the gateway's memory is read.", valueName: "s"))
        var duration = 3.0
        @Option(help: ArgumentHelp("The running gateway's process id, to read its memory (default: the process listening on --gateway's port).",
                                   valueName: "pid"))
        var gatewayPid: Int32?
        @Option(help: ArgumentHelp("Loop threads of the embedded gateway (its --loops; 0: one per core) (default: the gateway's own default, one per core).",
                                   valueName: "n"))
        var gatewayLoops: Int?
    }

    func shape() throws -> LoadShape {
        var shape = Self.scenario.defaultShape
        shape.connections = load.connections
        shape.devices = load.connections
        shape.stop = .duration(load.duration)
        return shape
    }

    func target() throws -> TargetOptions {
        var target = try services.target()
        target.gatewayPID = load.gatewayPid
        target.gatewayLoops = load.gatewayLoops
        return target
    }
}

struct BenchHTTP: LoadScenarioCommand {
    static let scenario = Scenario.http
    static let configuration = CommandConfiguration(
        commandName: "http", abstract: scenario.summary,
        discussion: """
            Each connection keeps one request in flight (HTTP/1.1 without pipelining), so \
            --connections is the load of a closed-loop run; --rate makes it open loop. The \
            embedded deployment runs a gateway and a store with --gateway and --http, mints an \
            API token for provider "bench", and every message goes to the bench user with a \
            push to one enrolled device that is never connected (the gateway queues it).
            """)

    @OptionGroup(title: "Load") var load: Load
    @OptionGroup(title: "Services (default: embedded)") var services: HTTPServiceFlags
    @OptionGroup(title: "Output") var output: LoadOutputFlags

    struct Load: ParsableArguments {
        @Option(help: ArgumentHelp("Keep-alive connections, each with one POST in flight.", valueName: "n"))
        var connections = Scenario.http.defaultShape.connections
        @Option(help: ArgumentHelp("Bytes of each message's text.", valueName: "bytes")) var payloadSize = Scenario.http.defaultShape.payloadSize
        @OptionGroup var pace: PaceFlags<BenchHTTP>
    }

    func shape() throws -> LoadShape {
        var shape = try load.pace.shape(connections: load.connections)
        guard shape.inflight == 1 else {
            throw CommandFailure("--inflight must be 1 for http (no pipelining): raise --connections instead")
        }
        shape.payloadSize = load.payloadSize
        return shape
    }

    func target() throws -> TargetOptions { try services.target() }
}

// MARK: - What the load scenarios share

/// A load scenario's subcommand: its flags make the load shape and the target.
protocol LoadScenarioCommand: ParsableCommand {
    static var scenario: Scenario { get }
    var output: LoadOutputFlags { get }
    func shape() throws -> LoadShape
    func target() throws -> TargetOptions
}

extension LoadScenarioCommand {
    func run() throws {
        let shape = try shape()
        do {
            try shape.validate()
        } catch {
            throw CommandFailure(error.description)
        }
        var benchmark = LoadBenchmark(scenario: Self.scenario, shape: shape, target: try target(), showProgress: !output.noProgress)
        benchmark.version = SecurePush.version
        let report: BenchReport
        do {
            report = try benchmark.run()
        } catch {
            throw CommandFailure("bench \(Self.scenario.rawValue): \(error)")
        }
        try output.report.deliver(report)
    }
}

/// How fast and how long a scenario loads its target; each flag given replaces the
/// scenario's default, shown in the help.
struct PaceFlags<Command: LoadScenarioCommand>: ParsableArguments {
    private static var defaults: LoadShape { Command.scenario.defaultShape }

    @Option(help: ArgumentHelp("Requests kept in flight per connection: closed loop" + Self.inflightDefault, valueName: "n"))
    var inflight: Int?
    @Option(help: ArgumentHelp("Operations per second: open loop, each latency counted from the operation's intended start"
                               + Self.rateDefault, valueName: "per-s"))
    var rate: Double?
    @Option(help: ArgumentHelp("Seconds measured" + Self.durationDefault, valueName: "s")) var duration: Double?
    @Option(help: ArgumentHelp("Operations measured" + Self.countDefault, valueName: "n")) var count: Int?
    @Option(help: ArgumentHelp("Seconds of load before measuring (default: \(ReportValue.number(Self.defaults.warmupSeconds).display)).",
                               valueName: "s"))
    var warmup: Double?

    private static var inflightDefault: String {
        defaults.rate == nil ? " (default: \(defaults.inflight))." : ", instead of --rate."
    }

    private static var rateDefault: String {
        defaults.rate.map { " (default: \(ReportValue.number($0).display))." } ?? ", instead of --inflight."
    }

    private static var durationDefault: String {
        if case .duration(let seconds) = defaults.stop { return " (default: \(ReportValue.number(seconds).display))." }
        return ", instead of --count."
    }

    private static var countDefault: String {
        if case .count(let count) = defaults.stop { return " (default: \(count))." }
        return ", instead of --duration."
    }

    func shape(connections: Int) throws -> LoadShape {
        var shape = Self.defaults
        shape.connections = connections
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
        if let warmup { shape.warmupSeconds = warmup }
        return shape
    }
}

/// Where the report goes besides stdout, and the exit status it earns.
struct ReportFlags: ParsableArguments {
    @Flag(help: "Print one JSON object instead of a table.") var json = false
    @Option(help: ArgumentHelp("Also write the latency distribution to this file in HdrHistogram's .hgrm text format, values in microseconds.",
                               valueName: "file"))
    var hdrOut: String?
    @Option(help: ArgumentHelp("Also draw the latency percentile curve into this file as an SVG image.", valueName: "file.svg"))
    var plot: String?

    /// Prints the report and writes the files; any failed operation then fails the command.
    func deliver(_ report: BenchReport) throws {
        announce(json ? report.json : report.text)
        do {
            if let hdrOut { try writeBenchFile(hdrOut, report.percentileDistribution) }
            if let plot { try writeBenchFile(plot, LatencyPlot(report: report).svg) }
        } catch {
            throw CommandFailure("bench \(report.scenario): \(error)")
        }
        guard report.errorCount == 0 else {
            throw CommandFailure("bench \(report.scenario): \(report.errorCount) failures (\(report.errorSummary))")
        }
    }
}

struct LoadOutputFlags: ParsableArguments {
    @OptionGroup var report: ReportFlags
    @Flag(help: "No live progress line on stderr (it is drawn only on a terminal anyway).") var noProgress = false
}

/// Writes one report file whole (a failure names the file and the reason).
private func writeBenchFile(_ path: String, _ text: String) throws {
    do {
        try writeReport(text, to: path)
    } catch {
        throw CommandFailure("\(error)")
    }
}

