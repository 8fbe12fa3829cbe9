import Foundation
import PushClient
import PushProcess
import PushTestSupport
import PushWire
import Testing

/// README.md's "Sealed payloads": its Python backend example runs as written, but for the
/// HTTP port, against a real store, and the devices of alice's open what it sealed.
@Suite("README: sealing from a Python backend", .ownThread)
struct ReadmeSealedTests {
    static let heading = "### Sealed payloads"

    /// Whether `python3` has pyca/cryptography's HPKE (47 or later), and the failure if not.
    static let pythonHPKE: Result<Void, ServiceError> = {
        guard let probe = try? ChildProcess.run(executable: "/usr/bin/env",
                                                arguments: ["python3", "-c", "from cryptography.hazmat.primitives import hpke"], seconds: 30)
        else { return .failure(.failed("cannot run python3")) }
        return probe.status == 0 ? .success(()) : .failure(.failed(probe.stderr))
    }()

    /// CI sets SECUREPUSH_REQUIRE_PYTHON_HPKE=1 after installing the package: the test then
    /// runs and fails without it. Elsewhere it runs when python3 has it.
    static let runs = ProcessInfo.processInfo.environment["SECUREPUSH_REQUIRE_PYTHON_HPKE"] == "1"
        || (try? pythonHPKE.get()) != nil

    @Test("[7.6-1] [7.6-3] [7.6-4] the Python example (pyca/cryptography's HPKE) seals to an X25519 and an X-Wing device over HTTP, and each device shows the text",
          .enabled(if: runs))
    func pythonExampleAsWritten() throws {
        let markdown = try Readme.text()
        let python = Readme.shellBlocks(in: markdown, heading: Self.heading, language: "python")
        try #require(python.count == 1, "one python block in \(Self.heading)")
        if case .failure(let failure) = Self.pythonHPKE {
            Issue.record("the example needs `python3 -m pip install 'cryptography>=47'`: \(failure)")
            return
        }

        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let services = try SealedPayloadProcessTests.Services(deployment, http: true)
        defer { services.stop() }
        let port = try #require(services.store.announcedHTTPPort)
        var devices: [DeviceRunProcess] = []
        defer { for device in devices { _ = device.stopAndCollect() } }
        for (name, suite) in [("phone", "x25519"), ("tablet", "xwing")] {
            devices.append(try DeviceRunProcess(deployment: deployment, device: name, user: "alice", password: "alice-pw",
                                                registration: try deployment.enroll(name), store: services.store,
                                                gatewayAddress: "127.0.0.1:\(services.gateway.port)",
                                                loginExtra: ["--key-suite", suite]))
        }
        let created = try SecurePushBinary.run(["provider", "token", "create", "billing", "--data-dir", deployment.directory])
        #expect(created.status == 0, "\(created.stderr)")
        let token = created.stdout.trimmingCharacters(in: .whitespacesAndNewlines)

        let script = python[0].replacingOccurrences(of: "127.0.0.1:8080", with: "127.0.0.1:\(port)")
        let ran = try ChildProcess.run(executable: "/usr/bin/env", arguments: ["TOKEN=\(token)", "python3", "-c", script], seconds: 60)
        #expect(ran.status == 0, "\(ran.stdout)\(ran.stderr)")
        let id = try #require(PayloadID(hex: ran.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "\(ran.stdout)")
        for device in devices {
            #expect(try waitUntil(timeoutSeconds: 30) { SealedPayloadProcessTests.shows(device, id: id.hex, text: "your code is 1237") },
                    "\(device.stateDirectory): \(device.child.standardOutput)\(device.child.standardError)")
        }
    }
}
