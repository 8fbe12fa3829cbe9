import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import PushClient
import PushConformance
import PushSecurity
import PushStore
import PushTestSupport
import Testing
import PushEventLoop
import PushProcess

/// A store and a gateway from this build, running in this process, with a user to log
/// in as: what the suite runs against in `swift test`.
final class OwnServices {
    let deployment: TemporaryDeployment
    let store: any ReachableService
    /// Drains the store and ends its threads.
    let stopStore: () -> Void
    let gateway: any ReachableService
    let user = "conformance-user"
    let password = "conformance password"
    let passwordFile: String
    /// The CA file (the services' self-signed certificate) when they serve TLS.
    let certificateFile: String?

    /// - Parameter gatewayLoops: above 1, the gateway runs that many loop threads.
    /// - Parameter storeLoops: above 1, the store runs that many loop threads.
    init(tls: Bool = false, gatewayLoops: Int = 1, storeLoops: Int = 1) throws {
        deployment = try TemporaryDeployment()
        try deployment.addUser(user, password: password)
        passwordFile = deployment.directory + "/conformance.pw"
        try Deployment.writePrivate(passwordFile, password + "\n")
        var serverTLS: TLSContext?
        if tls {
            let certificate = deployment.directory + "/tls.crt", key = deployment.directory + "/tls.key"
            try SelfSignedCertificate.write(commonName: "conformance", subjectAltNames: ["IP:127.0.0.1"],
                                            certificatePath: certificate, privateKeyPath: key)
            serverTLS = try TLSContext.server(certificateFile: certificate, privateKeyFile: key)
            certificateFile = certificate
        } else {
            certificateFile = nil
        }
        // A short store keepalive and gateway frame deadline let those cases run in
        // seconds (the frame deadline case talks to the gateway, the handshake deadline
        // case to the store, whose defaults the suite assumes); a queue of two makes
        // MISSED observable at the gateway. Every case comes from 127.0.0.1 and many check
        // BAD_TOKEN on purpose, more than the failed-token limit allows in 10 s; the shares
        // run at once, so the failed logins of one share (the login cases, the per-user
        // rate-limit case) would otherwise use up the address's budget for another share's
        // LOGIN, in whichever order the threads run.
        if gatewayLoops > 1 {
            gateway = try InProcessGatewayLoops(deployment, loops: gatewayLoops) {
                $0.queueCapacity = 2
                $0.maxOutputBytes = Self.gatewayMaxOutputBytes
                $0.outputStallMs = Self.gatewayOutputStallMs
                $0.limits.timeouts.frameMs = Self.frameDeadlineMs
                $0.tls = serverTLS
            }
        } else {
            gateway = try InProcessGateway(deployment) {
                $0.queueCapacity = 2
                $0.maxOutputBytes = Self.gatewayMaxOutputBytes
                $0.outputStallMs = Self.gatewayOutputStallMs
                $0.limits.timeouts.frameMs = Self.frameDeadlineMs
                $0.tls = serverTLS
            }
        }
        // The store hands SENDs' pushes to that gateway (SPEC.md 4.17).
        var gatewayEndpoint = ServerLink.Endpoint(HostPort(host: gateway.host, port: gateway.port))
        if let certificateFile { gatewayEndpoint.tls = try TLSContext.client(caFile: certificateFile) }
        let configureStore = { (configuration: inout StoreConfiguration) in
            configuration.gateway = gatewayEndpoint
            configuration.limits.keepaliveMs = 2000
            configuration.settings.badTokensPerAddress = 100_000
            configuration.settings.loginFailuresPerAddress = 100_000
            configuration.tls = serverTLS
        }
        if storeLoops > 1 {
            let loops = try InProcessStoreLoops(deployment, loops: storeLoops, configure: configureStore)
            store = loops
            stopStore = loops.stop
        } else {
            let single = try InProcessStore(deployment, configure: configureStore)
            store = single
            stopStore = single.stop
        }
    }

    static let frameDeadlineMs: Int64 = 3_000
    /// Small enough that the window binds in bytes before it does in number ([4.14-5]).
    static let gatewayMaxOutputBytes = 4_096
    /// Short enough that the stall case ([5.5-7]) runs in seconds without --slow.
    static let gatewayOutputStallMs: Int64 = 2_000

    var options: ConformanceOptions {
        var options = ConformanceOptions(store: HostPort(host: store.host, port: store.port), gateway: HostPort(host: gateway.host, port: gateway.port),
                                         keys: ConformanceKeys(deployment: deployment.deployment), user: user, password: Array(password.utf8))
        options.frameDeadlineMs = Self.frameDeadlineMs
        options.gatewayMaxOutputBytes = Self.gatewayMaxOutputBytes
        options.gatewayOutputStallMs = Self.gatewayOutputStallMs
        if let certificateFile, let context = try? TLSContext.client(caFile: certificateFile) {
            options.tls = ConformanceTLS(context: context)
        }
        return options
    }

    var cliArguments: [String] {
        ["conformance", "--store", "\(store.host):\(store.port)", "--gateway", "\(gateway.host):\(gateway.port)",
         "--data-dir", deployment.directory, "--user", user, "--password-file", passwordFile,
         "--frame-deadline-ms", "\(Self.frameDeadlineMs)", "--gateway-max-output-bytes", "\(Self.gatewayMaxOutputBytes)",
         "--gateway-output-stall-ms", "\(Self.gatewayOutputStallMs)"] + (certificateFile.map { ["--ca-file", $0] } ?? [])
    }
}

/// Cases the command-line run selects: enough to exercise both services, the keys from
/// --data-dir and the password file, without repeating the whole in-process run.
let commandLineSelection = ["hello", "fields", "store.login-token"]

/// The whole suite in-process, its cases dealt over a few threads: most cases wait (for
/// silence, a keepalive, an expiry), so the shares overlap their waits. Each share is a
/// run of its own, with its own unique names, as two runs against one deployment are.
func runInShares(_ options: ConformanceOptions, shares: Int) async throws -> [CaseResult] {
    let plan = try ConformanceSuite.plan(options)
    return try await withThrowingTaskGroup(of: [CaseResult].self) { group in
        for index in 0..<shares {
            var part = plan
            part.selected = plan.selected.enumerated().filter { $0.offset % shares == index }.map(\.element)
            group.addTask { [part] in try await onOwnThread { ConformanceSuite.run(part, options: options).results } }
        }
        var all: [CaseResult] = []
        for try await results in group { all += results }
        return all
    }
}

@Suite("The conformance suite against this build's store and gateway", .ownThread)
struct OwnServicesTests {
    @Test("zero FAILs in-process; `securepush conformance` passes a selection and writes JSON and JUnit reports")
    func ownServicesConform() async throws {
        let services = try OwnServices()
        let reports = FileManager.default.temporaryDirectory.appendingPathComponent("conformance-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: reports, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: reports) }

        // The command-line run goes on beside the in-process one; unique names keep them apart.
        let arguments = services.cliArguments + ["--json", reports + "/report.json", "--junit", reports + "/report.xml"] + commandLineSelection
        async let cli = onOwnThread { try SecurePushBinary.run(arguments, timeoutSeconds: 90) }
        let results = try await runInShares(services.options, shares: 4)
        let failures = results.filter { $0.verdict == .fail }
        #expect(failures.isEmpty, "\(failures.map { "\($0.id) [\($0.clause)]: \($0.detail)" }.joined(separator: "\n"))")
        // Everything this setup provides should run; only --slow cases, TLS's own and those
        // for a gateway that follows a registry (this one follows none) may skip.
        let skipped = results.filter { $0.verdict == .skipped && !$0.detail.contains("--slow") && !$0.detail.contains("--ca-file")
                                       && !$0.detail.contains("follows no registry") }
        #expect(skipped.isEmpty, "unexpectedly skipped: \(skipped.map { "\($0.id): \($0.detail)" })")
        let covered = Set(results.filter { $0.verdict.ran }.map(\.clause))
        #expect(covered.count >= 100, "covered \(covered.count) of \(SpecClauses.all.count)")
        #expect(results.count > 150)
        #expect(Set(results.map(\.id)).count == results.count, "every case ran once")

        let (status, stdout, stderr) = try await cli
        #expect(status == 0, "exit \(status)\n\(stdout.suffix(4_000))\n\(stderr.suffix(2_000))")
        #expect(stdout.contains("clauses covered: "))
        #expect(!stdout.contains(" FAIL "))

        var selected = services.options
        selected.selection = commandLineSelection
        let json = try String(contentsOfFile: reports + "/report.json", encoding: .utf8)
        let parsed = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        let summary = parsed?["summary"] as? [String: Any]
        #expect(summary?["failed"] as? Int == 0)
        #expect(summary?["clauses_total"] as? Int == SpecClauses.all.count)
        let cases = parsed?["cases"] as? [[String: Any]] ?? []
        #expect(cases.count == (try ConformanceSuite.plan(selected).selected.count))
        #expect(cases.allSatisfy { $0["id"] is String && $0["clause"] is String && $0["verdict"] is String && $0["detail"] is String && $0["duration_ms"] is Int })

        let xml = try String(contentsOfFile: reports + "/report.xml", encoding: .utf8)
        #expect(xml.hasPrefix("<?xml"))
        #expect(xml.contains("failures=\"0\""))
        #expect((try? XMLDocument(xmlString: xml)) != nil, "the JUnit report is well-formed XML")
    }

    /// The whole suite over TLS runs once, against services on four loops (below): on one
    /// loop it would run the same cases over the same TLS code without the hand-offs. Here,
    /// on one loop, the TLS case and the HELLOs run in-process, and the command line.
    @Test("over TLS (--ca-file) on one loop the TLS case and every HELLO case pass, in-process and through the command line; without --ca-file the probe says the services serve TLS")
    func ownServicesConformOverTLS() async throws {
        let services = try OwnServices(tls: true)
        var options = services.options
        options.selection = ["tls.", "hello."]
        let results = try await onOwnThread { [options] in try ConformanceSuite.run(options).results }
        let failures = results.filter { $0.verdict == .fail }
        #expect(failures.isEmpty, "\(failures.map { "\($0.id) [\($0.clause)]: \($0.detail)" }.joined(separator: "\n"))")
        let skipped = results.filter { $0.verdict == .skipped && !$0.detail.contains("--slow") && !$0.detail.contains("follows no registry")
                                       && !$0.detail.contains("plain TCP connections only") }
        #expect(skipped.isEmpty, "unexpectedly skipped: \(skipped.map { "\($0.id): \($0.detail)" })")
        #expect(results.first { $0.id == "tls.same-framing" }?.verdict == .pass)
        #expect(results.contains { $0.id.hasPrefix("hello.") && $0.verdict == .pass })

        // The command line too, including the probe over TLS; and without --ca-file the
        // probe says the services serve TLS.
        let cli = try SecurePushBinary.run(services.cliArguments + ["hello.store-device", "tls."], timeoutSeconds: 60)
        #expect(cli.status == 0, "\(cli.stdout) \(cli.stderr)")
        let plain = try SecurePushBinary.run(["conformance", "--store", "127.0.0.1:\(services.store.port)", "--timeout-ms", "2000"],
                                             timeoutSeconds: 60)
        #expect(plain.status == 2)
        #expect(plain.stderr.split(separator: "\n").count == 1, "\(plain.stderr)")
        #expect(plain.stderr.contains("pass --ca-file"), "\(plain.stderr)")
    }

    @Test("""
        over TLS (--ca-file) against a gateway and a store on 4 loops each the whole suite passes as over plain TCP, the TLS \
        case included: devices move to their home loop with their TLS session, and any store loop serves what another stored
        """)
    func ownServicesConformOverTLSWithLoops() async throws {
        let services = try OwnServices(tls: true, gatewayLoops: 4, storeLoops: 4)
        let results = try await runInShares(services.options, shares: 4)
        let failures = results.filter { $0.verdict == .fail }
        #expect(failures.isEmpty, "\(failures.map { "\($0.id) [\($0.clause)]: \($0.detail)" }.joined(separator: "\n"))")
        // The stall case needs a small receive buffer, which only plain TCP connections set.
        let skipped = results.filter { $0.verdict == .skipped && !$0.detail.contains("--slow") && !$0.detail.contains("follows no registry")
                                       && !$0.detail.contains("plain TCP connections only") }
        #expect(skipped.isEmpty, "unexpectedly skipped: \(skipped.map { "\($0.id): \($0.detail)" })")
        #expect(results.count > 150)
        #expect(results.contains { $0.id.hasPrefix("gateway.") && $0.verdict == .pass })
        #expect(results.first { $0.id == "tls.same-framing" }?.verdict == .pass)
    }

    @Test("outside the source tree (another working directory) no vector case is skipped: the vectors are built in")
    func vectorsOutsideTheSourceTree() throws {
        let services = try OwnServices()
        let elsewhere = FileManager.default.temporaryDirectory.appendingPathComponent("conformance-cwd-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: elsewhere) }
        let arguments = services.cliArguments + ["--json", elsewhere + "/report.json", "vector."]
        // The shell changes directory, then becomes the binary.
        let result = try ChildProcess.run(executable: "/bin/sh", arguments: ["-c", "cd \"$0\" && exec \"$@\"", elsewhere, SecurePushBinary.path] + arguments,
                                          seconds: 120)
        #expect(result.status == 0, "\(result.stdout.suffix(2_000)) \(result.stderr)")
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: elsewhere + "/report.json"))) as? [String: Any]
        let cases = json?["cases"] as? [[String: Any]] ?? []
        let judged = VectorFiles.all.filter { if case .message = $0.expectation { false } else { true } }
        #expect(cases.count == judged.count, "every malformed or incomplete vector ran")
        let notPassed = cases.filter { $0["verdict"] as? String != "PASS" }
        #expect(notPassed.isEmpty, "\(notPassed)")
    }
}
