import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import PushEventLoop
import PushSecurity
import PushTestSupport
import Testing

/// `securepush bench` as a user meets it: the help of each scenario, the files it
/// writes, the exit status after failures, and TLS to running services.
@Suite(.ownThread, .serialized)
struct BenchCommandTests {
    static let quick = ["--warmup", "0", "--no-progress", "--json"]
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The long flags a help text lists (each at the start of an option row).
    static func flags(inHelpOf arguments: [String]) throws -> Set<String> {
        let result = try SecurePushBinary.run(arguments + ["--help"])
        #expect(result.status == 0, "\(arguments): \(result.stderr)")
        var flags: Set<String> = []
        for line in result.stdout.split(separator: "\n") where line.hasPrefix("  -") {
            // The option column only: flags, their short forms and value names.
            for word in line.split(separator: " ") {
                guard word.hasPrefix("-") || word.hasPrefix("<") else { break }
                if word.hasPrefix("--") { flags.insert(String(word.split(separator: ",").first ?? word)) }
            }
        }
        return flags
    }

    @Test func eachScenarioListsOnlyItsOwnFlags() throws {
        let output: Set = ["--json", "--hdr-out", "--plot"]
        let pace: Set = ["--inflight", "--rate", "--duration", "--count", "--warmup"]
        let tls: Set = ["--ca-file", "--server-name", "--tls", "--embedded", "--data-dir"]
        let common: Set = ["--help", "--version"]
        let stores: Set = ["--database", "--stores", "--store-loops"]
        let cluster: Set = ["--gateways", "--nats", "--gateway-loops"]
        let expected: [String: Set<String>] = [
            "echo": common.union(output).union(["--inflight", "--payload-size", "--duration", "--warmup"]),
            "store": common.union(output).union(pace).union(tls).union(stores).union(["--no-progress", "--connections", "--payload-size", "--store", "--user",
                                                                                       "--send"]),
            "fetch": common.union(output).union(pace).union(tls).union(stores).union(["--no-progress", "--connections", "--payload-size", "--store", "--user"]),
            "push": common.union(output).union(pace).union(tls).union(cluster).union(["--no-progress", "--connections", "--devices", "--gateway"]),
            "fanout": common.union(output).union(pace).union(tls).union(cluster).union(["--no-progress", "--connections", "--devices", "--gateway"]),
            "e2e": common.union(output).union(pace).union(tls).union(stores).union(cluster).union(["--no-progress", "--connections", "--devices", "--payload-size", "--send",
                                                                     "--sealed", "--key-suite", "--store", "--gateway", "--user", "--password-file"]),
            "connections": common.union(output).union(tls).union(["--no-progress", "--connections", "--duration", "--gateway", "--gateway-pid", "--gateway-loops"]),
            "http": common.union(output).union(pace).union(["--no-progress", "--connections", "--payload-size", "--embedded", "--http-url",
                                                             "--api-token", "--user"]),
        ]
        for (scenario, flags) in expected {
            #expect(try Self.flags(inHelpOf: ["bench", scenario]) == flags, "bench \(scenario) --help")
        }
        let overview = try SecurePushBinary.run(["bench", "--help"]).stdout
        for scenario in expected.keys { #expect(overview.contains("\n  \(scenario) "), "bench --help names \(scenario)") }
    }

    /// Text wrapped twice breaks lines early: a line ends although the next word would
    /// have fitted. Wrapped once (by the help generator, to lines under 80 columns), it
    /// never does.
    @Test func helpTextIsWrappedOnce() throws {
        for arguments in [["bench"], ["bench", "store"], ["bench", "fanout"], ["bench", "connections"], ["conformance"]] {
            let text = try SecurePushBinary.run(arguments + ["--help"]).stdout
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            #expect(lines.allSatisfy { $0.count < 80 }, "\(arguments): a line of 80 columns or more")
            for (line, next) in zip(lines, lines.dropFirst()) where !line.isEmpty && !next.isEmpty {
                // Only running text: rows of lists and tables start with spaces or a flag.
                guard !line.hasPrefix(" "), !next.hasPrefix(" "), !next.hasPrefix("-") else { continue }
                let nextWord = next.split(separator: " ").first.map(String.init) ?? ""
                #expect(line.count + 1 + nextWord.count >= 80, "\(arguments): broken early: \"\(line)\" / \"\(next)\"")
            }
        }
    }

    @Test func benchmarksMdCommandsUseFlagsTheirScenarioHas() throws {
        let text = try String(contentsOf: Self.repository.appendingPathComponent("BENCHMARKS.md"), encoding: .utf8)
        var checked = 0
        var helps: [String: Set<String>] = [:]
        for line in text.split(separator: "\n") {
            guard let range = line.range(of: #"(securepush|\$bin|\$B) bench [a-z0-9]+[^`|#]*"#, options: .regularExpression) else { continue }
            let words = line[range].split(separator: " ").map(String.init)
            let scenario = words[2]
            if helps[scenario] == nil { helps[scenario] = try Self.flags(inHelpOf: ["bench", scenario]) }
            for flag in words.dropFirst(3) where flag.hasPrefix("--") {
                #expect(helps[scenario]?.contains(flag) == true, "BENCHMARKS.md: `bench \(scenario) ... \(flag)`")
            }
            checked += 1
        }
        #expect(checked >= 20)
    }

    @Test func writesTheDistributionAndThePlot() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bench-files-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try SecurePushBinary.run(["bench", "echo", "--duration", "0.3", "--warmup", "0", "--json",
                                               "--hdr-out", directory + "/echo.hgrm", "--plot", directory + "/echo.svg"])
        #expect(result.status == 0, "\(result.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        let hgrm = try String(contentsOfFile: directory + "/echo.hgrm", encoding: .utf8)
        #expect(hgrm.hasPrefix("       Value     Percentile TotalCount 1/(1-Percentile)\n\n"))
        let totalLine = try #require(hgrm.split(separator: "\n").first { $0.contains("Total count") })
        let total = totalLine.split(separator: "=").last?.filter(\.isNumber)
        #expect(total.flatMap { Int($0) } == json["operations"] as? Int, "\(totalLine)")
        let svg = try String(contentsOfFile: directory + "/echo.svg", encoding: .utf8)
        let document = try XMLDocument(xmlString: svg)
        #expect(try document.nodes(forXPath: "//*[local-name()='polyline']").count == 1)
        #expect(svg.contains("securepush bench echo"))
    }

    @Test func failedOperationsMakeTheExitStatusOneWithOneLine() throws {
        let deployment = try TemporaryDeployment()
        let store = try InProcessStore(deployment)
        defer { store.stop() }
        // STOREs for a user the store does not know: every one is refused.
        let result = try SecurePushBinary.run(["bench", "store", "--store", "127.0.0.1:\(store.port)", "--data-dir", deployment.directory,
                                               "--user", "nobody-here", "--count", "20", "--connections", "1", "--inflight", "4"] + Self.quick)
        #expect(result.status == 1, "\(result.stdout) \(result.stderr)")
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.count == 1, "\(result.stderr)")
        #expect(lines.first?.hasPrefix("Error: bench store: 20 failures (") == true, "\(result.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(json["errors"] as? Int == 20, "the report still comes out: \(result.stdout)")
    }

    @Test func loadsRunningServicesOverTLS() throws {
        let deployment = try TemporaryDeployment()
        let certificate = deployment.directory + "/tls.crt", key = deployment.directory + "/tls.key"
        try SelfSignedCertificate.write(commonName: "bench test", subjectAltNames: ["IP:127.0.0.1", "DNS:localhost"],
                                        certificatePath: certificate, privateKeyPath: key)
        let tls = try TLSContext.server(certificateFile: certificate, privateKeyFile: key)
        let store = try InProcessStore(deployment) { $0.tls = tls }
        defer { store.stop() }
        let target = ["--store", "127.0.0.1:\(store.port)", "--data-dir", deployment.directory]
        let load = ["--count", "100", "--connections", "2", "--inflight", "4"] + Self.quick

        let secure = try SecurePushBinary.run(["bench", "store"] + target + ["--ca-file", certificate] + load)
        #expect(secure.status == 0, "\(secure.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(secure.stdout.utf8)) as? [String: Any])
        #expect(json["tls"] as? Bool == true)
        #expect(json["operations"] as? Int == 100)

        let named = try SecurePushBinary.run(["bench", "store"] + target + ["--ca-file", certificate, "--server-name", "localhost"] + load)
        #expect(named.status == 0, "\(named.stderr)")

        let plain = try SecurePushBinary.run(["bench", "store"] + target + load)
        #expect(plain.status != 0)
        #expect(plain.stderr.contains("--ca-file"), "a plain client against TLS says so: \(plain.stderr)")

        let wrongName = try SecurePushBinary.run(["bench", "store"] + target + ["--ca-file", certificate, "--server-name", "example.org"] + load)
        #expect(wrongName.status != 0)
        #expect(wrongName.stderr.contains("TLS"), "\(wrongName.stderr)")
    }

    @Test func embeddedServicesServeTLSOnRequest() throws {
        let result = try SecurePushBinary.run(["bench", "e2e", "--tls", "--count", "50", "--devices", "5", "--inflight", "4"] + Self.quick,
                                              timeoutSeconds: 90)
        #expect(result.status == 0, "\(result.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(json["tls"] as? Bool == true)
        #expect(json["errors"] as? Int == 0)
    }
}
