import Foundation
import PushConformance
import PushTestSupport
import Testing
import PushEventLoop

/// The suite must be able to fail: against a peer that answers garbage or nothing, the
/// cases that talk to it FAIL, quickly, and the command exits non-zero.
@Suite("The conformance suite against deliberately wrong peers")
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
    @Test("a peer that answers garbage, or nothing, fails every case that talks to it",
          .timeLimit(.minutes(1)), arguments: [FakePeer.Behaviour.garbage, .silent])
    func wrongPeerFails(_ behaviour: FakePeer.Behaviour) throws {
        let peer = try FakePeer(behaviour)
        defer { peer.stop() }
        let report = try ConformanceSuite.run(Self.options(port: peer.port))
        #expect(report.results.count == Self.selection.count)
        #expect(report.hasFailures)
        let passed = report.results.filter { $0.verdict == .pass }
        #expect(passed.isEmpty, "passed against a \(behaviour) peer: \(passed.map(\.id))")
    }

    @Test("`securepush conformance` exits 1 when a case fails")
    func commandExitsNonZero() throws {
        let peer = try FakePeer(.garbage)
        defer { peer.stop() }
        let result = try SecurePushBinary.run(["conformance", "--store", "127.0.0.1:\(peer.port)", "--timeout-ms", "400",
                                               "hello.store-device", "frame.back-to-back"], timeoutSeconds: 30)
        #expect(result.status == 1, "exit \(result.status): \(result.stdout) \(result.stderr)")
        #expect(result.stdout.contains("FAIL"))
    }
}
