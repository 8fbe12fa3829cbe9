import Foundation
import Testing
import PushClient
import PushEventLoop
import PushSecurity
import PushTestSupport
import PushWire

/// `securepush gateway`'s registry flags and config key, with the gateway as a child
/// process and a `FakeRegistryStore` in this process as the store.
@Suite("securepush gateway --store", .ownThread, .serialized)
struct GatewayRegistryCommandTests {
    /// HELLOs with `credential` until one is not BUSY (the registry is loaded), at most `seconds`.
    func settledHello(_ gateway: ServiceProcess, _ credential: [UInt8], seconds: Double = 15) throws -> Message? {
        var settled: Message?
        try waitUntil(timeoutSeconds: seconds, pollMilliseconds: 100) {
            let reply = try gateway.connect().hello(Hello(role: .device, credential: credential))
            if case .error(let error) = reply, error.status == .busy { return false }
            settled = reply
            return true
        }
        return settled
    }

    @Test("without --store the gateway says at start that it follows no registry, and admits any signed registration")
    func noRegistry() throws {
        let deployment = try TemporaryDeployment(commandLine: true)
        let gateway = try ServiceProcess(["gateway", "--data-dir", deployment.directory])
        defer { _ = gateway.terminate() }
        #expect(gateway.standardErrorText().contains("not following a device registry"))
        #expect(try gateway.connect().hello(Hello(role: .device, credential: deployment.registration("phone"))).type == .helloOK)
    }

    @Test("--store with --store-ca-file and --store-server-name follows a store over TLS")
    func tlsStore() throws {
        let deployment = try TemporaryDeployment(commandLine: true)
        let certificate = deployment.directory + "/store.pem"
        let key = deployment.directory + "/store.key"
        try SelfSignedCertificate.write(commonName: "store.example", subjectAltNames: ["DNS:store.example"],
                                        certificatePath: certificate, privateKeyPath: key)
        let store = try FakeRegistryStore(serverKey: deployment.deployment.serverKey,
                                          tls: TLSContext.server(certificateFile: certificate, privateKeyFile: key))
        defer { store.stop() }
        let phone = deployment.registration("phone")
        store.record(.enrolled, phone)
        let gateway = try ServiceProcess(["gateway", "--data-dir", deployment.directory, "--store", "127.0.0.1:\(store.port)",
                                          "--store-ca-file", certificate, "--store-server-name", "store.example"])
        defer { _ = gateway.terminate() }
        #expect(try settledHello(gateway, phone)?.type == .helloOK)
        #expect(try settledHello(gateway, deployment.registration("stranger"))
                == .error(ErrorReply(status: .badCredentials, message: "registration not enrolled")))
        // The host logs one refusal a second: a BUSY refused while the registry loaded can
        // take this second's line, so the stranger asks again until its refusal is logged.
        let reason = "reason=registration refused: not enrolled"
        #expect(try waitUntil(pollMilliseconds: 100) {
            _ = try settledHello(gateway, deployment.registration("stranger"))
            return gateway.standardErrorText().contains(reason)
        }, "the refusal is logged with its reason: \(gateway.standardErrorText())")
        #expect(gateway.standardErrorText().contains("device registry loaded"))
    }

    @Test("without --store-server-name the store's certificate must name its address: the gateway stays not ready")
    func tlsNameMismatch() throws {
        let deployment = try TemporaryDeployment(commandLine: true)
        let certificate = deployment.directory + "/store.pem"
        let key = deployment.directory + "/store.key"
        try SelfSignedCertificate.write(commonName: "store.example", subjectAltNames: ["DNS:store.example"],
                                        certificatePath: certificate, privateKeyPath: key)
        let store = try FakeRegistryStore(serverKey: deployment.deployment.serverKey,
                                          tls: TLSContext.server(certificateFile: certificate, privateKeyFile: key))
        defer { store.stop() }
        let gateway = try ServiceProcess(["gateway", "--data-dir", deployment.directory, "--store", "127.0.0.1:\(store.port)",
                                          "--store-ca-file", certificate])
        defer { _ = gateway.terminate() }
        #expect(waitUntil(timeoutSeconds: 10) { gateway.standardErrorText().contains("cannot reach the store")
            || gateway.standardErrorText().contains("certificate verify failed") })
        let reply = try gateway.connect().hello(Hello(role: .device, credential: deployment.registration("phone")))
        #expect(reply == .error(ErrorReply(status: .busy, message: "the gateway is loading its device registry; retry")))
    }

    @Test("gateway.store in the config file is followed without the flag")
    func configKey() throws {
        let deployment = try TemporaryDeployment(commandLine: true)
        let store = try FakeRegistryStore(serverKey: deployment.deployment.serverKey)
        defer { store.stop() }
        let config = deployment.directory + "/securepush.conf"
        let text = try String(contentsOfFile: config, encoding: .utf8) + "gateway.store = 127.0.0.1:\(store.port)\n"
        try text.write(toFile: config, atomically: true, encoding: .utf8)
        let phone = deployment.registration("phone")
        let gateway = try ServiceProcess(["gateway", "--data-dir", deployment.directory])
        defer { _ = gateway.terminate() }
        #expect(try settledHello(gateway, phone)
                == .error(ErrorReply(status: .badCredentials, message: "registration not enrolled")))
        store.record(.enrolled, phone)
        #expect(waitUntil(timeoutSeconds: 10) { (try? settledHello(gateway, phone))??.type == .helloOK })
    }

    @Test("--store-ca-file without a store to follow, and --store with port 0, are refused at start")
    func badFlags() throws {
        let deployment = try TemporaryDeployment(commandLine: true)
        let noStore = try SecurePushBinary.run(["gateway", "--data-dir", deployment.directory, "--listen", "127.0.0.1:0",
                                                "--store-ca-file", deployment.directory + "/none.pem"], timeoutSeconds: 20)
        #expect(noStore.status != 0)
        #expect(noStore.stderr.contains("--store-ca-file and --store-server-name need --store"))
        let portZero = try SecurePushBinary.run(["gateway", "--data-dir", deployment.directory, "--listen", "127.0.0.1:0",
                                                 "--store", "127.0.0.1:0"], timeoutSeconds: 20)
        #expect(portZero.status != 0)
        #expect(portZero.stderr.contains("--store needs the store's port"))
    }
}
