import ArgumentParser
import PushConformance
import PushSecurity
#if canImport(Glibc)
import Glibc
import PushEventLoop
#endif

/// `securepush conformance`: the black-box protocol conformance suite, against any
/// store and gateway that claim to speak protocol/SPEC.md.
struct ConformanceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "conformance",
        abstract: "Check a store and a gateway against the protocol spec, one case per testable clause.",
        discussion: """
        Every case opens its own connections, names the spec clause it judges and \
        ends PASS, FAIL or SKIPPED. A case is SKIPPED when the run lacks what it \
        needs: a service address, the deployment's keys, a user, or --slow. The run \
        ends with how many of the spec's numbered clauses it covered (a clause is \
        covered when a case for it ran) and lists the clauses it did not cover, \
        with why. The exit status is 1 if any case FAILed.

        First one HELLO to each service makes sure it speaks the protocol. If \
        something else answers (an HTTP server, garbage, silence) or nothing listens, \
        no case runs: one line on stderr says what was found, the reports are still \
        written, and the exit status is 2. A service that goes down during the run \
        stops it the same way.

        What the flags make possible:
          --store, --gateway  the services under test (cases for a missing one SKIP)
          --data-dir          the deployment made by `securepush init`: its keys
                              sign provider credentials, device registrations and
                              fetch tokens exactly as the deployment's tools do
          --user              a user the store knows: the recipient of STOREs
          --password-file     that user's password, for the LOGIN cases
          --device            a device enrolled for --user (`securepush device
                              enroll`): LOGIN and fetch tokens need one. Without
                              it the suite enrolls its own, and revokes them after,
                              when --data-dir is where the store keeps its database;
                              the registry cases that enroll or revoke need that too
          --slow              also the cases that wait 45 s or a long keepalive
          --ca-file           connect with TLS, verifying the services with this CA

        Every run uses fresh device ids, user names and tags and recalls what it \
        stores, so it can run again and again against the same services. It makes \
        a few failed logins (an unknown user, a wrong password, up to ten for the \
        rate-limit case): several runs within the store's failed-login window may \
        make later LOGIN cases SKIP as RATE_LIMITED. Use a user kept for testing.

        CASE arguments pick cases by id or id prefix (hello.max-frame, store., \
        vector.) or by clause or clause prefix (4.7-3, 4.7, 5). The golden vectors \
        of protocol/vectors are built in; --vectors runs other files instead.

        With --client device or --client provider the suite grades a client instead: \
        it plays the store and the gateway itself on 127.0.0.1 and starts the client \
        with --client-cmd once per case, replacing {gateway} {store} {credential} \
        {state} {device} {user} {provider-key}; what it reads of the client besides \
        the wire is the contract of SPEC.md Appendix B. --jobs runs cases side by \
        side; --trace prints what the servers saw in each failed case.

        Examples:
          securepush conformance --client device --jobs 4 --client-cmd
              "mydevice --gateway {gateway} --store {store} --credential {credential} --state {state}"
          securepush conformance --store 127.0.0.1:7070 --gateway 127.0.0.1:7071
              --data-dir ./deploy --user alice --password-file alice.pw
              --json report.json --junit report.xml
          securepush conformance --store 127.0.0.1:7070 hello 2 vector.
          securepush conformance --list 4.13
        """)

    @Option(help: ArgumentHelp("The store to test.", valueName: "host:port"))
    var store: HostPort?

    @Option(help: ArgumentHelp("The gateway to test.", valueName: "host:port"))
    var gateway: HostPort?

    @Option(help: ArgumentHelp("The deployment made by `securepush init` (reads server.key and provider.key).", valueName: "dir"))
    var dataDir: String?

    @Option(help: ArgumentHelp("A user the store knows: the recipient of the STORE cases.", valueName: "name"))
    var user: String?

    @Option(help: ArgumentHelp("A file whose first line is --user's password, for the LOGIN cases.", valueName: "file"))
    var passwordFile: String?

    @Option(help: ArgumentHelp("A device enrolled for --user in the store's registry, for LOGIN and fetch tokens (default: the suite enrolls its own in --data-dir's store database).", valueName: "id"))
    var device: String?

    @Option(help: ArgumentHelp("Run the .vec files of this directory instead of the golden vectors built in (protocol/vectors when this binary was built).", valueName: "dir"))
    var vectors: String?

    @Option(help: ArgumentHelp("Connect with TLS, verifying the services' certificates against this CA (PEM).", valueName: "file"))
    var caFile: String?

    @Option(help: ArgumentHelp("The name the services' certificates must carry (default: the host of each address).", valueName: "name"))
    var serverName: String?

    @Flag(help: "Also run the cases that wait 45 s (idle client) or a long keepalive interval.")
    var slow = false

    @Option(help: ArgumentHelp("How long to wait for any one reply.", valueName: "ms"))
    var timeoutMs = 5_000

    @Option(help: ArgumentHelp("The handshake deadline of the store (else the gateway), if configured away from the spec's 5000.", valueName: "ms"))
    var handshakeDeadlineMs = 5_000

    @Option(help: ArgumentHelp("The frame deadline of the gateway (else the store), if configured away from the spec's 10000.", valueName: "ms"))
    var frameDeadlineMs = 10_000

    @Option(help: ArgumentHelp("The gateway's delivery window, if configured away from the spec's 64.", valueName: "count"))
    var gatewayDeliveryWindow = 64

    @Option(help: ArgumentHelp("The gateway's output cap, if configured away from the spec's 65536.", valueName: "bytes"))
    var gatewayMaxOutputBytes = 65_536

    @Option(help: ArgumentHelp("The gateway's stall limit, if configured away from the spec's 10000 (0: turned off); the stall case runs without --slow when it is at most 5000.", valueName: "ms"))
    var gatewayOutputStallMs = 10_000

    @Option(help: ArgumentHelp("Write a JSON report here.", valueName: "file"))
    var json: String?

    @Option(help: ArgumentHelp("Write a JUnit XML report here.", valueName: "file"))
    var junit: String?

    @Flag(help: "List the cases (with the selection applied) and the clauses no case covers, without running anything.")
    var list = false

    @Argument(help: ArgumentHelp("Cases to run, by id, id prefix, clause or clause prefix; all when none.", valueName: "case"))
    var cases: [String] = []

    @Option(help: ArgumentHelp("Grade a client instead of servers: the suite plays the gateway and the store itself and starts the client with --client-cmd (SPEC.md Appendix B).", valueName: "device|provider"))
    var client: ClientKind?

    @Option(help: ArgumentHelp("The client's command line, with placeholders {gateway} {store} {credential} {state} {device} {user} {provider-key} (SPEC.md Appendix B.1).", valueName: "command"))
    var clientCmd: String?

    @Option(help: ArgumentHelp("With --client: how many cases run side by side, each with servers and a client of its own.", valueName: "count"))
    var jobs = 1

    @Flag(help: "With --client: after a failed case, print on stderr what the harness's servers saw and sent in it.")
    var trace = false

    func validate() throws {
        if client != nil || clientCmd != nil { return try validateClientRun() }
        guard list || store != nil || gateway != nil else { throw ValidationError("give --store, --gateway or both") }
        guard (100...600_000).contains(timeoutMs) else { throw ValidationError("--timeout-ms must be 100 to 600000") }
        guard passwordFile == nil || user != nil else { throw ValidationError("--password-file needs --user") }
        guard device == nil || user != nil else { throw ValidationError("--device needs --user, the user it is enrolled for") }
        guard serverName == nil || caFile != nil else { throw ValidationError("--server-name goes with --ca-file") }
        guard (100...600_000).contains(handshakeDeadlineMs), (100...600_000).contains(frameDeadlineMs) else {
            throw ValidationError("--handshake-deadline-ms and --frame-deadline-ms must be 100 to 600000")
        }
        guard gatewayDeliveryWindow >= 1 else { throw ValidationError("--gateway-delivery-window must be at least 1") }
        guard gatewayMaxOutputBytes >= 1024 else { throw ValidationError("--gateway-max-output-bytes must be at least 1024") }
        guard (0...3_600_000).contains(gatewayOutputStallMs) else { throw ValidationError("--gateway-output-stall-ms must be 0 to 3600000") }
        if let user { try validateUserName(user) }
        var probe = ConformanceOptions()
        probe.vectorsDirectory = vectors
        do {
            _ = try ConformanceSuite.select(ConformanceSuite.catalogue(probe), cases)
        } catch {
            throw ValidationError(error.description)
        }
    }

    func run() throws {
        if let client { return try runClientSuite(client) }
        let options = try makeOptions()
        let plan: ConformanceSuite.Plan
        do {
            plan = try ConformanceSuite.plan(options)
        } catch {
            throw CommandFailure(error.description)
        }
        if list {
            printList(plan)
            return
        }
        let layout = ConformanceReport.TableLayout(ids: plan.selected.map(\.id), clauses: plan.selected.map(\.clause))
        announce("securepush conformance: store \(options.store?.description ?? "-"), gateway \(options.gateway?.description ?? "-"), \(plan.selected.count) cases")
        // The header waits for the first row: a run stopped by the probe has none.
        var headed = false
        let report = ConformanceSuite.run(plan, options: options) { result in
            if !headed { announce(layout.header) }
            headed = true
            announce(layout.row(result))
        }
        announce("")
        announce(report.summary)
        try writeReports(report)
        if let aborted = report.aborted {
            writeStandardError("Error: \(aborted)\n")
            throw ExitCode(2)
        }
        if report.hasFailures { throw ExitCode(1) }
    }

    /// The --json and --junit files of a run.
    func writeReports(_ report: ConformanceReport) throws {
        do {
            if let json { try writeReportFile(json, report.json) }
            if let junit { try writeReportFile(junit, report.junitXML) }
        } catch {
            throw CommandFailure(error.description)
        }
    }

    private func makeOptions() throws -> ConformanceOptions {
        var options = ConformanceOptions(
            store: store.map { HostPort(host: $0.host, port: $0.port) },
            gateway: gateway.map { HostPort(host: $0.host, port: $0.port) },
            keys: try dataDir.map { ConformanceKeys(deployment: try openDeployment($0)) },
            user: user,
            password: try passwordFile.map(readPasswordFile))
        options.vectorsDirectory = vectors
        options.device = device
        if let caFile {
            do {
                options.tls = ConformanceTLS(context: try TLSContext.client(caFile: caFile), serverName: serverName)
            } catch {
                throw CommandFailure("TLS: \(error)")
            }
        }
        options.slow = slow
        options.timeoutMs = Int32(timeoutMs)
        options.quietMs = Int32(min(300, timeoutMs))
        options.handshakeDeadlineMs = Int64(handshakeDeadlineMs)
        options.frameDeadlineMs = Int64(frameDeadlineMs)
        options.gatewayDeliveryWindow = gatewayDeliveryWindow
        options.gatewayMaxOutputBytes = gatewayMaxOutputBytes
        options.gatewayOutputStallMs = Int64(gatewayOutputStallMs)
        options.selection = cases
        return options
    }

    private func printList(_ plan: ConformanceSuite.Plan) {
        let layout = ConformanceReport.TableLayout(ids: plan.selected.map(\.id), clauses: plan.selected.map(\.clause))
        for item in plan.selected {
            announce(item.id + String(repeating: " ", count: max(0, layout.idWidthForListing - item.id.count)) + "  "
                     + item.clause + String(repeating: " ", count: max(0, 8 - item.clause.count)) + "  " + item.title)
        }
        let clauses = Set(plan.catalogue.map(\.clause))
        let covered = SpecClauses.all.filter(clauses.contains)
        announce("")
        announce("\(plan.selected.count) of \(plan.catalogue.count) cases; the catalogue has cases for \(covered.count) of \(SpecClauses.all.count) clauses")
        for clause in SpecClauses.all where !clauses.contains(clause) {
            announce("  " + clause + String(repeating: " ", count: max(0, 7 - clause.count)) + "not covered: " + (SpecClauses.notTestableFromTheWire[clause] ?? "no case"))
        }
    }
}

/// The first line of a password file, without its line ending.
func readPasswordFile(_ path: String) throws -> [UInt8] {
    let text: String
    do {
        text = try Deployment.readFile(path)
    } catch {
        throw CommandFailure("\(error)")
    }
    var line = Array((text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first ?? "").utf8)
    if line.last == UInt8(ascii: "\r") { line.removeLast() }
    guard !line.isEmpty else { throw CommandFailure("\(path): the first line is empty") }
    guard line.count <= 256 else { throw CommandFailure("\(path): a password is at most 256 bytes") }
    return line
}
