import Foundation
import Testing
import PushClient
import PushClock
import PushEventLoop
import PushProcess
import PushSecurity
import PushTestSupport
import PushWire

/// `securepush provider session` (Appendix B.3) as a child process, its commands in a file
/// given as stdin.
@Suite("provider session", .ownThread, .serialized)
struct ProviderSessionProcessTests {
    private func lines(_ text: String) -> [String] { text.split(separator: "\n").map(String.init) }

    @Test("against a store and a gateway: SEND, STORE, PUSH, RECALL each answered on its tag, a bad line INVALID, and exit 0 at the end of stdin")
    func commands() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let gateway = try InProcessGateway(deployment)
        // The store takes SEND only with a gateway to hand its pushes to.
        let store = try InProcessStore(deployment) { $0.gateway = ServerLink.Endpoint(host: gateway.host, port: gateway.port) }
        let unknown = PayloadID(high: 7, low: 7).hex
        let input = """
            s1 SEND alice 68656C6C6F ttl=60
            s2 STORE alice 6869
            k1 SEND alice 00 key=same-key
            k2 SEND alice 00 key=same-key
            p1 PUSH alice \(unknown)
            r1 RECALL \(unknown)
            bad SEND alice
            !not a tag
            u1 SEND nobody 00

            """
        let result = try SecurePushBinary.run(["provider", "session", "--store", "127.0.0.1:\(store.port)",
                                               "--gateway", "127.0.0.1:\(gateway.port)", "--data-dir", deployment.directory],
                                              stdin: input, timeoutSeconds: 30)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let answers = Dictionary(lines(result.stdout).map { line in
            (String(line.prefix { $0 != " " }), String(line.drop { $0 != " " }.dropFirst()))
        }, uniquingKeysWith: { first, _ in first })
        #expect(lines(result.stdout).count == 9, "\(result.stdout)")
        for tag in ["s1", "s2", "k1"] {
            let words = answers[tag]?.split(separator: " ") ?? []
            #expect(words.count == 2 && words[0] == "OK" && PayloadID(hex: String(words[1])) != nil, "\(tag): \(answers[tag] ?? "none")")
        }
        #expect(answers["k2"] == answers["k1"], "the same idempotency key answers the same id")
        #expect(answers["p1"] == "OK 0 0", "no device of alice is connected")
        #expect(answers["r1"] == "ERROR NOT_FOUND")
        #expect(answers["bad"] == "ERROR INVALID")
        #expect(answers["?"] == "ERROR INVALID")
        #expect(answers["u1"]?.hasPrefix("ERROR ") == true && answers["u1"] != "ERROR INVALID", "\(answers["u1"] ?? "none")")
    }

    @Test("commands are pipelined on one connection and answered as their replies arrive, out of order")
    func pipelinedOutOfOrder() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let store = try ScriptedServer(loop: loop)
        defer { store.stop() }
        let ids = [PayloadID(high: 1, low: 1), PayloadID(high: 2, low: 2)]
        var sends = 0
        store.onMessage = { [loop] peer, message, correlation in
            guard !ScriptedServer.answerHandshake(peer, message, correlation), case .send = message else { return }
            let id = ids[min(sends, 1)]
            // The first SEND's reply is held until the second has been answered.
            let delay = sends == 0 ? 300 : 0
            sends += 1
            loop.schedule(after: .milliseconds(Int64(delay))) {
                peer.send(.sendOK(SendOK(id: id, expiresAt: Clocks.wallMilliseconds() + 60_000)), correlation: correlation)
            }
        }
        let key = try SecretKey.generate()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("session-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try Deployment.writePrivate(directory + "/provider.key", key.fileText)
        let child = try ChildProcess(executable: SecurePushBinary.path, arguments: [
            "provider", "session", "--store", "127.0.0.1:\(store.port)", "--provider-key", directory + "/provider.key",
        ], stdinText: "first SEND alice 01\nsecond SEND alice 02\n")
        #expect(loop.run(until: { child.hasExited }, timeoutSeconds: 20))
        #expect(child.wait(seconds: 5) == 0, "stderr: \(child.standardErrorTail)")
        #expect(lines(child.standardOutput) == ["second OK \(ids[1].hex)", "first OK \(ids[0].hex)"])
        #expect(store.peers.count == 1, "one store connection")
    }
}
