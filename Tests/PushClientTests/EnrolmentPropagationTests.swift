import Foundation
@testable import PushClient
import PushProcess
import PushTestSupport
import PushWire
import Testing

/// A device started right after `device enroll` may reach a gateway that has not heard of
/// the enrolment yet ([4.16-8]: within a second): its "not enrolled" refusal is retried
/// for a few seconds instead of ending `device run`.
@Suite("Enrolments on their way to the gateway", .ownThread)
struct EnrolmentPropagationTests {
    @Test("only a young registration's \"not enrolled\" refusal may pass; revoked, forged and old ones stay final")
    func whichRefusalsMayPass() {
        let issued: UInt64 = 1_000_000
        let notEnrolled = ClientError.refused(.badCredentials, "registration not enrolled")
        #expect(DeviceClient.mayBeUnheardEnrolment(notEnrolled, issuedAt: issued, nowMs: issued + 200))
        #expect(DeviceClient.mayBeUnheardEnrolment(notEnrolled, issuedAt: issued, nowMs: issued + DeviceClient.enrolmentPropagationMs - 1))
        #expect(!DeviceClient.mayBeUnheardEnrolment(notEnrolled, issuedAt: issued, nowMs: issued + DeviceClient.enrolmentPropagationMs))
        #expect(!DeviceClient.mayBeUnheardEnrolment(notEnrolled, issuedAt: nil, nowMs: issued))
        #expect(!DeviceClient.mayBeUnheardEnrolment(.refused(.badCredentials, "registration revoked"), issuedAt: issued, nowMs: issued))
        #expect(!DeviceClient.mayBeUnheardEnrolment(.refused(.badCredentials, "bad signature"), issuedAt: issued, nowMs: issued))
        #expect(!DeviceClient.mayBeUnheardEnrolment(.refused(.forbidden, "registration not enrolled"), issuedAt: issued, nowMs: issued))
        #expect(!DeviceClient.mayBeUnheardEnrolment(.refused(.badCredentials, nil), issuedAt: issued, nowMs: issued))
    }

    @Test("device run started at once after its enrolment connects once the gateway following the store has heard of it")
    func deviceStartedRightAfterEnrolmentConnects() throws {
        let (deployment, store, gateway) = try Self.storeAndFollowingGateway()
        for round in 0..<3 {
            let name = "fresh-\(round)"
            let credential = try DeviceRunFailureTests.credentialFile(try deployment.enroll(name, user: "alice"), in: deployment.directory)
            let child = try DeviceRunFailureTests.deviceRun(gateway: "127.0.0.1:\(gateway.port)", store: "127.0.0.1:\(store.port)",
                                                            credential: credential, stateDirectory: deployment.directory + "/" + name)
            defer { child.killHard() }
            #expect(waitUntil(timeoutSeconds: 10) { child.standardError.contains("connected to the gateway as \(name)") },
                    "\(child.standardErrorTail)")
            #expect(!child.hasExited)
        }
    }

    @Test("[7.4-8] a client that does not retry, sending HELLO at once after the enrolment, is admitted: the gateway holds the HELLO until it hears")
    func helloAtOnceAfterEnrolmentIsHeldNotRefused() throws {
        // The store is kept: a ServiceProcess stops its process when it goes.
        let (deployment, store, gateway) = try Self.storeAndFollowingGateway()
        defer { withExtendedLifetime(store) {} }
        for round in 0..<5 {
            let credential = try deployment.enroll("at-once-\(round)", user: "alice")
            let client = try BlockingWireClient(host: "127.0.0.1", port: gateway.port)
            let reply = try client.hello(Hello(role: .device, credential: credential))
            guard case .helloOK = reply else {
                Issue.record("round \(round): \(reply)")
                return
            }
        }
    }

    /// A store binary with user alice, and a gateway binary following it whose registry
    /// (empty) is loaded on every loop: until then a device HELLO is BUSY anyway. Each loop
    /// logs its own "device registry loaded"; /readyz says 200 once all have.
    private static func storeAndFollowingGateway() throws -> (TemporaryDeployment, ServiceProcess, ServiceProcess) {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let store = try ServiceProcess(["store", "--data-dir", deployment.directory])
        let gateway = try ServiceProcess(["gateway", "--data-dir", deployment.directory, "--store", "127.0.0.1:\(store.port)",
                                          "--metrics", "127.0.0.1:0"])
        let port = try #require(gateway.announcedMetricsPort)
        #expect(waitUntil { (try? HTTPGet.fetch(port: port, path: "/readyz"))?.status == 200 })
        return (deployment, store, gateway)
    }
}
