import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import PushConformance
import PushTestSupport
import Testing
import PushEventLoop

/// Against something that is not a securepush service, the run stops before its first
/// case with one sentence saying what answered; against nothing at all, it says the
/// service is down. The cases themselves can still fail on their own.
@Suite("The conformance suite against deliberately wrong peers", .ownThread)
struct WrongPeerTests {
    /// Cases that need no credentials, so every one of them reaches the peer.
    static let selection = ["hello.store-device", "hello.version-none", "frame.back-to-back", "frame.split-1-byte",
                            "conn.pipeline-ping", "vector.bad_version_2", "vector.unknown_type_0x00", "store.missing-token"]

    static func options(port: Int) -> ConformanceOptions {
        var options = ConformanceOptions(store: HostPort(host: "127.0.0.1", port: port))
        options.timeoutMs = 400
        options.quietMs = 100
        options.selection = selection
        return options
    }

    /// Every case waits at most `timeoutMs`, so a wrong peer cannot make the run hang; the
    /// time limit only turns a regression there into a failure instead of a stuck suite.
    @Test("without the probe, every case that talks to a wrong peer FAILs on its own",
          .timeLimit(.minutes(1)), arguments: [FakePeer.Behaviour.garbage, .silent, .http])
    func casesFailOnTheirOwn(_ behaviour: FakePeer.Behaviour) throws {
        let peer = try FakePeer(behaviour)
        defer { peer.stop() }
        let report = try ConformanceSuite.run(Self.options(port: peer.port), probing: false)
        #expect(report.results.count == Self.selection.count)
        #expect(report.aborted == nil)
        let passed = report.results.filter { $0.verdict == .pass }
        #expect(passed.isEmpty, "passed against a \(behaviour) peer: \(passed.map(\.id))")
        #expect(report.hasFailures)
    }

    @Test("the probe stops the run before any case, naming what answered", .timeLimit(.minutes(1)),
          arguments: [(FakePeer.Behaviour.garbage, "bytes that are no securepush frame: ff ff ff"),
                      (.silent, "no answer to HELLO within 400 ms"),
                      (.http, "it answered HELLO with \"HTTP/1.1 400 Bad Request\"")])
    func probeStops(_ behaviour: FakePeer.Behaviour, _ expected: String) throws {
        let peer = try FakePeer(behaviour)
        defer { peer.stop() }
        let report = try ConformanceSuite.run(Self.options(port: peer.port))
        #expect(report.results.isEmpty)
        #expect(report.selectedCount == Self.selection.count)
        let reason = try #require(report.aborted)
        #expect(reason.hasPrefix("127.0.0.1:\(peer.port) (--store) does not speak the securepush protocol: "), "\(reason)")
        #expect(reason.contains(expected), "\(reason)")
        #expect(report.isFailure)
    }

    @Test("against an HTTP server the command stops at once: exit 2, one line, reports still written", .timeLimit(.minutes(1)))
    func commandAgainstHTTP() throws {
        let peer = try FakePeer(.http)
        defer { peer.stop() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("conformance-http-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try SecurePushBinary.run(["conformance", "--store", "127.0.0.1:\(peer.port)",
                                               "--json", directory + "/report.json", "--junit", directory + "/report.xml"], timeoutSeconds: 30)
        #expect(result.status == 2, "exit \(result.status): \(result.stdout) \(result.stderr)")
        let expected = "Error: 127.0.0.1:\(peer.port) (--store) does not speak the securepush protocol: it answered HELLO with \"HTTP/1.1 400 Bad Request\"\n"
        #expect(result.stderr == expected)
        #expect(!result.stdout.contains("FAIL"))

        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: directory + "/report.json"))) as? [String: Any]
        #expect((json?["aborted"] as? String)?.contains("does not speak the securepush protocol") == true)
        let summary = json?["summary"] as? [String: Any]
        #expect(summary?["cases"] as? Int == 0)
        #expect((summary?["selected"] as? Int ?? 0) > 150)
        let xml = try String(contentsOfFile: directory + "/report.xml", encoding: .utf8)
        let document = try XMLDocument(xmlString: xml)
        let errors = try document.nodes(forXPath: "//testcase/error")
        #expect(errors.count == 1)
        #expect(errors.first?.stringValue?.contains("HTTP/1.1 400 Bad Request") == true)
    }

    @Test("against a silent port the command gives up after one reply timeout", .timeLimit(.minutes(1)))
    func commandAgainstSilence() throws {
        let peer = try FakePeer(.silent)
        defer { peer.stop() }
        let result = try SecurePushBinary.run(["conformance", "--store", "127.0.0.1:\(peer.port)", "--gateway", "127.0.0.1:\(peer.port)"],
                                              timeoutSeconds: 30)
        #expect(result.status == 2)
        #expect(result.stderr == "Error: 127.0.0.1:\(peer.port) (--store) does not speak the securepush protocol: no answer to HELLO within 5000 ms (if it serves TLS, pass --ca-file)\n")
    }

    @Test("against a service that is down: one line, exit 2", .timeLimit(.minutes(1)))
    func commandAgainstClosedPort() throws {
        let port = try freeLoopbackPort()
        let result = try SecurePushBinary.run(["conformance", "--gateway", "127.0.0.1:\(port)"], timeoutSeconds: 30)
        #expect(result.status == 2)
        #expect(result.stderr == "Error: cannot reach the gateway at 127.0.0.1:\(port) (--gateway): connection refused; is it running?\n")
    }

    @Test("a service that goes down during the run stops it after the case that found out", .timeLimit(.minutes(1)))
    func serviceGoesDown() throws {
        let services = try OwnServices()
        var options = services.options
        options.selection = ["hello."]
        var stopped = false
        let report = try ConformanceSuite.run(options) { _ in
            if !stopped { services.stopStore() }
            stopped = true
        }
        let selected = try ConformanceSuite.plan(options).selected.count
        #expect(report.results.count >= 2 && report.results.count < selected, "\(report.results.count) of \(selected) ran")
        #expect(report.aborted?.contains("refused a connection") == true, "\(report.aborted ?? "not aborted")")
    }
}
