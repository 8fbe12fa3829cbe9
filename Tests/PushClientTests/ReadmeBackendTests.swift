import Foundation
import Testing
import PushClient
import PushProcess
import PushTestSupport
import PushWire

/// README.md's "Sending from your backend": its shell block (a token, then curl) and its
/// Python block run as written, but for the deployment directory and the HTTP port, against
/// a real store and gateway, with a device of alice's connected.
@Suite("README: sending from your backend", .ownThread)
struct ReadmeBackendTests {
    static let heading = "### Sending from your backend"

    @Test("the curl example and the Python example each send one message that reaches alice's device")
    func examplesAsWritten() throws {
        let markdown = try Readme.text()
        let shell = Readme.shellBlocks(in: markdown, heading: Self.heading)
        let python = Readme.shellBlocks(in: markdown, heading: Self.heading, language: "python")
        try #require(shell.count == 1 && python.count == 1, "one sh block and one python block in \(Self.heading)")

        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let registration = try deployment.enroll("phone")
        let gateway = try ServiceProcess(["gateway", "--data-dir", deployment.directory])
        let store = try ServiceProcess(["store", "--data-dir", deployment.directory, "--gateway", "127.0.0.1:\(gateway.port)",
                                        "--http", "127.0.0.1:0"])
        defer { _ = store.terminate(); _ = gateway.terminate() }
        let port = try #require(store.announcedHTTPPort)
        let device = try SendThroughStoreProcessTests.device(deployment, gateway: gateway.port, registration: registration)
        func asHere(_ text: String) -> String {
            text.replacingOccurrences(of: "/srv/push", with: deployment.directory)
                .replacingOccurrences(of: "127.0.0.1:8080", with: "127.0.0.1:\(port)")
        }
        let path = URL(fileURLWithPath: SecurePushBinary.path).deletingLastPathComponent().path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")

        // The shell block, then the token it made, for the Python example to use.
        let script = "set -euo pipefail\n" + asHere(shell[0]) + "\necho\necho \"TOKEN=$TOKEN\"\n"
        let ran = try ChildProcess.run(executable: "/usr/bin/env", arguments: ["PATH=\(path)", "bash", "-c", script], seconds: 60)
        #expect(ran.status == 0, "\(ran.stdout)\(ran.stderr)")
        let lines = ran.stdout.split(separator: "\n")
        let answer = try #require(lines.first { $0.hasPrefix("{") }, "\(ran.stdout)")
        let sent = try #require(try JSONSerialization.jsonObject(with: Data(answer.utf8)) as? [String: Any])
        let curlID = try #require((sent["id"] as? String).flatMap(PayloadID.init(hex:)), "\(answer)")
        #expect(sent["replayed"] as? Bool == false && sent["expires_at"] is String)
        let token = try #require(lines.last { $0.hasPrefix("TOKEN=") }.map { String($0.dropFirst("TOKEN=".count)) })

        let pythonRun = try ChildProcess.run(executable: "/usr/bin/env", arguments: ["TOKEN=\(token)", "python3", "-c", asHere(python[0])],
                                             seconds: 60)
        #expect(pythonRun.status == 0, "\(pythonRun.stderr)")
        let pythonID = try #require(PayloadID(hex: pythonRun.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "\(pythonRun.stdout)")

        var pushed: [[UInt8]] = []
        for _ in 0..<2 {
            let (header, message) = try device.receive()
            guard case .push(let push) = message else { Issue.record("the device got \(message)"); return }
            pushed.append(push.id)
            _ = try device.send(.deliveryAck(DeliveryAck(id: push.id)), correlation: header.correlation)
        }
        #expect(Set(pushed) == [curlID.bytes, pythonID.bytes])
    }
}
