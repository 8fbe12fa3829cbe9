import Foundation
import Testing
import PushEventLoop
import PushProcess
import PushSecurity
import PushTestSupport

/// `securepush device run` against failures: permanent ones end it with one line and a
/// non-zero exit; passing ones are retried with one line per change of state.
@Suite("securepush device run on failures, as a process", .ownThread, .serialized)
struct DeviceRunFailureTests {
    /// Writes `registration` as `device enroll` does and returns the file's path.
    static func credentialFile(_ registration: [UInt8], in directory: String) throws -> String {
        let path = directory + "/device-\(UUID().uuidString).cred"
        try Deployment.writePrivate(path, registration.map { String(format: "%02x", $0) }.joined() + "\n")
        return path
    }

    static func deviceRun(gateway: String, store: String, credential: String, stateDirectory: String, extra: [String] = [])
        throws -> ChildProcess
    {
        try ChildProcess(executable: SecurePushBinary.path,
                         arguments: ["device", "run", "--gateway", gateway, "--store", store, "--credential", credential,
                                     "--state-dir", stateDirectory] + extra)
    }

    /// Runs `device run` to its end; the exit status and its stderr lines.
    static func runToExit(_ child: ChildProcess) -> (status: Int32?, lines: [Substring]) {
        // A bound on a hang: a permanent failure ends the process at once.
        let status = child.wait(seconds: 10)
        if status == nil { child.killHard() }
        return (status, child.standardError.split(separator: "\n"))
    }

    @Test("a registration signed by another deployment's key: a non-zero exit and one line naming the refusal")
    func foreignCredential() throws {
        let deployment = try TemporaryDeployment()
        let other = try TemporaryDeployment()
        let store = try ServiceProcess(["store", "--data-dir", deployment.directory])
        let gateway = try ServiceProcess(["gateway", "--data-dir", deployment.directory])
        let credential = try Self.credentialFile(other.registration("phone"), in: deployment.directory)
        let child = try Self.deviceRun(gateway: "127.0.0.1:\(gateway.port)", store: "127.0.0.1:\(store.port)",
                                       credential: credential, stateDirectory: deployment.directory + "/phone")
        let (status, lines) = Self.runToExit(child)
        #expect(status == 1, "exit \(String(describing: status)); stderr: \(lines)")
        #expect(lines.count == 1, "\(lines)")
        #expect(lines.first?.contains("refused the registration") == true, "\(lines)")
        #expect(lines.first?.contains("BAD_CREDENTIALS") == true, "\(lines)")
        #expect(child.standardOutput.isEmpty)
    }

    @Test("a CA file that did not sign the gateway's certificate: a non-zero exit and one line naming the verification failure")
    func caMismatch() throws {
        let certificates = try CommandMessageTests.Certificates()
        let deployment = try TemporaryDeployment()
        let tls = ["--tls-cert", certificates.certificate, "--tls-key", certificates.key]
        let store = try ServiceProcess(["store", "--data-dir", deployment.directory] + tls)
        let gateway = try ServiceProcess(["gateway", "--data-dir", deployment.directory] + tls)
        let credential = try Self.credentialFile(deployment.registration("phone"), in: deployment.directory)
        let child = try Self.deviceRun(gateway: "localhost:\(gateway.port)", store: "localhost:\(store.port)",
                                       credential: credential, stateDirectory: deployment.directory + "/phone",
                                       extra: ["--ca-file", certificates.otherCertificate])
        let (status, lines) = Self.runToExit(child)
        #expect(status == 1, "exit \(String(describing: status)); stderr: \(lines)")
        #expect(lines.count == 1, "\(lines)")
        #expect(lines.first?.contains("failed TLS verification: certificate verify failed") == true, "\(lines)")
    }

    @Test("a gateway that is not running yet: the device keeps trying, says so once, and connects when it comes up")
    func transientFailureIsOneLine() throws {
        let deployment = try TemporaryDeployment()
        let store = try ServiceProcess(["store", "--data-dir", deployment.directory])
        // A port nothing listens on yet, below the ephemeral range: a port another process
        // was given by the kernel and gave back (a gateway started on port 0 and stopped)
        // can be handed to the next process that binds port 0, which with tests running side
        // by side is another test's gateway, and the device then talks to that one.
        let port = try freeLoopbackPort()
        let credential = try Self.credentialFile(deployment.registration("phone"), in: deployment.directory)
        let child = try Self.deviceRun(gateway: "127.0.0.1:\(port)", store: "127.0.0.1:\(store.port)",
                                       credential: credential, stateDirectory: deployment.directory + "/phone")
        defer { child.killHard() }
        // Time is what is tested: over 3 s of attempts at the backoff's pace (0.1 s doubling
        // to 5 s) the device says so once. A loaded machine makes fewer attempts, which can
        // only make this easier to pass, never fail it; nothing else shows the attempts.
        usleep(3_000_000)
        #expect(!child.hasExited, "a refused connection is not a reason to stop: \(child.standardErrorTail)")
        let refused = child.standardError.split(separator: "\n").filter { $0.contains("connection refused") }
        #expect(refused.count == 1, "one line for the state, not one per attempt: \(child.standardError)")
        #expect(refused.first?.hasSuffix("; retrying") == true)

        let (gateway, _) = try startGateway(dataDirectory: deployment.directory, port: port)
        defer { gateway.terminate(graceSeconds: 10) }
        #expect(waitUntil(timeoutSeconds: 15) { child.standardError.contains("connected to the gateway as phone") },
                "\(child.standardErrorTail)")
        #expect(child.terminate(graceSeconds: 10) == 0)
    }
}
