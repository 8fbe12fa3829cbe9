import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import PushConformance
import PushSecurity
import PushTestSupport
import Testing

/// A store and a gateway from this build, running in this process, with a user to log
/// in as: what the suite runs against in `swift test`.
final class OwnServices {
    let deployment: TemporaryDeployment
    let store: InProcessStore
    let gateway: InProcessGateway
    let user = "conformance-user"
    let password = "conformance password"
    let passwordFile: String

    init() throws {
        deployment = try TemporaryDeployment()
        try deployment.addUser(user, password: password)
        passwordFile = deployment.directory + "/conformance.pw"
        try Deployment.writePrivate(passwordFile, password + "\n")
        // A short store keepalive lets the keepalive cases run in seconds; a queue of two
        // makes MISSED observable at the gateway.
        store = try InProcessStore(deployment) { $0.limits.keepaliveMs = 2000 }
        gateway = try InProcessGateway(deployment) { $0.queueCapacity = 2 }
    }

    var options: ConformanceOptions {
        ConformanceOptions(store: Endpoint(host: store.host, port: store.port), gateway: Endpoint(host: gateway.host, port: gateway.port),
                           keys: ConformanceKeys(deployment: deployment.deployment), user: user, password: Array(password.utf8))
    }

    var cliArguments: [String] {
        ["conformance", "--store", "\(store.host):\(store.port)", "--gateway", "\(gateway.host):\(gateway.port)",
         "--data-dir", deployment.directory, "--user", user, "--password-file", passwordFile]
    }
}

/// What the CLI run on another thread left behind.
final class CLIRun: @unchecked Sendable {
    var status: Int32 = -1
    var stdout = ""
    var stderr = ""
    var error: String?
}

@Suite("The conformance suite against this build's store and gateway")
struct OwnServicesTests {
    @Test("zero FAILs in-process and through `securepush conformance`, with JSON and JUnit reports")
    func ownServicesConform() throws {
        let services = try OwnServices()
        let reports = FileManager.default.temporaryDirectory.appendingPathComponent("conformance-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: reports, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: reports) }

        // The CLI run goes on beside the in-process one: the suite's unique names keep
        // the two apart, and the whole test stays well under a minute.
        let cli = CLIRun()
        let finished = DispatchSemaphore(value: 0)
        let arguments = services.cliArguments + ["--json", reports + "/report.json", "--junit", reports + "/report.xml"]
        Thread {
            do {
                (cli.status, cli.stdout, cli.stderr) = try SecurePushBinary.run(arguments, timeoutSeconds: 90)
            } catch {
                cli.error = "\(error)"
            }
            finished.signal()
        }.start()

        let report = try ConformanceSuite.run(services.options)
        let failures = report.results.filter { $0.verdict == .fail }
        // The whole table helps whoever has to find out why a case failed.
        if !failures.isEmpty { print(report.table + "\n" + report.summary) }
        #expect(failures.isEmpty, "\(failures.map { "\($0.id) [\($0.clause)]: \($0.detail)" }.joined(separator: "\n"))")
        // Everything this setup provides should run; only --slow cases may skip.
        let skipped = report.results.filter { $0.verdict == .skipped && !$0.detail.contains("--slow") }
        #expect(skipped.isEmpty, "unexpectedly skipped: \(skipped.map { "\($0.id): \($0.detail)" })")
        #expect(report.coveredClauses.count >= 100, "covered \(report.coveredClauses.count) of \(report.clausesTotal)")
        #expect(report.results.count > 150)

        #expect(finished.wait(timeout: .now() + 100) == .success, "the CLI run did not finish")
        #expect(cli.error == nil, "\(cli.error ?? "")")
        #expect(cli.status == 0, "exit \(cli.status)\n\(cli.stdout.suffix(4_000))\n\(cli.stderr.suffix(2_000))")
        #expect(cli.stdout.contains("clauses covered: "))
        #expect(!cli.stdout.contains(" FAIL "))

        let json = try String(contentsOfFile: reports + "/report.json", encoding: .utf8)
        let parsed = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        let summary = parsed?["summary"] as? [String: Any]
        #expect(summary?["failed"] as? Int == 0)
        #expect(summary?["clauses_total"] as? Int == SpecClauses.all.count)
        let cases = parsed?["cases"] as? [[String: Any]] ?? []
        #expect(cases.count == report.results.count)
        #expect(cases.allSatisfy { $0["id"] is String && $0["clause"] is String && $0["verdict"] is String && $0["detail"] is String && $0["duration_ms"] is Int })

        let xml = try String(contentsOfFile: reports + "/report.xml", encoding: .utf8)
        #expect(xml.hasPrefix("<?xml"))
        #expect(xml.contains("failures=\"0\""))
        #expect((try? XMLDocument(xmlString: xml)) != nil, "the JUnit report is well-formed XML")
    }
}
