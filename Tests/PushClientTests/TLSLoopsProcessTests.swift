import Foundation
import Testing
import PushTestSupport

/// The released binaries over TLS with several loops: a store and a gateway on 4 loops
/// each, the gateway following the store's registry over TLS, devices running
/// `securepush device run` and a provider running `securepush send`, all with `--ca-file`.
/// Device connections move to their home loop, and store connections to the next loop in
/// turn, with their TLS sessions.
@Suite("TLS with several loops, across the binaries", .ownThread, .serialized)
struct TLSLoopsProcessTests {
    @Test("over TLS, a store and a gateway on 4 loops each deliver a secure push to every device of the user, each shown once")
    func securePushOverTLSOnLoops() throws {
        let certificates = try CommandMessageTests.Certificates()
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let tls = ["--tls-cert", certificates.certificate, "--tls-key", certificates.key, "--loops", "4"]
        let store = try ServiceProcess(["store", "--data-dir", deployment.directory] + tls)
        let gateway = try ServiceProcess(["gateway", "--data-dir", deployment.directory, "--store", "localhost:\(store.port)",
                                          "--store-ca-file", certificates.certificate] + tls)
        let names = (0..<6).map { "tls-device-\($0)" }
        let registrations = try names.map { try deployment.enroll($0, user: "alice") }
        // Started at once: a device that comes before the gateway has heard of its
        // enrolment ([4.16-8]: within a second) tries again.
        let devices = try zip(names, registrations).map { name, registration in
            try DeviceRunProcess(deployment: deployment, device: name, user: "alice", password: "alice-pw",
                                 registration: registration,
                                 store: ServiceAddress(host: "localhost", port: store.port),
                                 gatewayAddress: "localhost:\(gateway.port)", extra: ["--ca-file", certificates.certificate])
        }
        defer { for device in devices { _ = device.stopAndCollect() } }
        #expect(waitUntil(timeoutSeconds: 30) { devices.allSatisfy { $0.gatewayConnections >= 1 } },
                "\(devices.map { $0.child.standardErrorTail }) GATEWAY \(gateway.standardErrorText()) STORE \(store.standardErrorText())")
        for round in 0..<3 {
            let sent = try CommandMessageTests.run(["send", "--store", "localhost:\(store.port)", "--gateway", "localhost:\(gateway.port)",
                                                    "--provider-key", deployment.directory + "/provider.key",
                                                    "--ca-file", certificates.certificate,
                                                    "--to", "user:alice", "--text", "over TLS \(round)"])
            #expect(sent.status == 0, "\(sent.stderr)")
        }
        #expect(waitUntil(timeoutSeconds: 30) { devices.allSatisfy { $0.shownCount >= 3 } },
                "\(devices.map { $0.shownCount })")
        for device in devices {
            let shown = device.stopAndCollect().map(\.text)
            #expect(shown == ["over TLS 0", "over TLS 1", "over TLS 2"], "\(shown)")
        }
        #expect(store.terminate() == 0)
        #expect(gateway.terminate() == 0)
    }
}

/// A service by address, for helpers that take any reachable service.
private struct ServiceAddress: ReachableService {
    var host: String
    var port: Int
}
