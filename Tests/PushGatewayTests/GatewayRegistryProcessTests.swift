import Foundation
import Testing
import PushClient
import PushProcess
import PushSecurity
import PushTestSupport
import PushWire

/// `securepush store` and `securepush gateway --store` as child processes over one
/// deployment made by the command line, devices enrolled and revoked with `securepush
/// device enroll` and `securepush device revoke`: the registry as an operator runs it.
///
/// These need the store's side of the registry (the registry table that `device enroll`
/// and `device revoke` write, and REGISTRY served to role gateway).
final class RegistryDeployment {
    let deployment: TemporaryDeployment
    private(set) var store: ChildProcess?
    private(set) var storePort = 0
    private(set) var gateway: ServiceProcess?

    init() throws {
        deployment = try TemporaryDeployment(commandLine: true)
        try deployment.addUser("alice", password: "alice-pw")
    }

    var directory: String { deployment.directory }

    /// Starts the store on `port` (0: a free one, remembered for a restart).
    func startStore(port: Int = 0) throws {
        let child = try ChildProcess(executable: SecurePushBinary.path,
                                     arguments: ["store", "--data-dir", directory, "--listen", "127.0.0.1:\(port)"])
        let address = try child.waitForLine(prefix: "listening on ", seconds: 30)
        guard let bound = Int(address.split(separator: ":").last ?? "") else { throw ServiceError.failed("bad address \(address)") }
        store = child
        storePort = bound
    }

    func stopStore() {
        _ = store?.terminate(graceSeconds: 10)
        store = nil
    }

    /// A port nothing listens on now, for a store started later.
    func reserveStorePort() throws {
        try startStore()
        stopStore()
    }

    func startGateway(_ extra: [String] = []) throws {
        gateway = try ServiceProcess(["gateway", "--data-dir", directory, "--store", "127.0.0.1:\(storePort)"] + extra)
    }

    /// `securepush device enroll`; the registration as the device presents it.
    func enroll(_ device: String, tags: [String] = []) throws -> (file: String, credential: [UInt8]) {
        let file = directory + "/\(device).cred"
        let result = try SecurePushBinary.run(["device", "enroll", "--data-dir", directory, "--user", "alice", "--device", device,
                                               "--out", file] + tags.flatMap { ["--tag", $0] })
        guard result.status == 0 else { throw ServiceError.failed("device enroll: \(result.stderr)") }
        let hex = try String(contentsOfFile: file, encoding: .utf8).filter { !$0.isWhitespace }
        guard let credential = [UInt8](hex: hex) else { throw ServiceError.failed("\(file) is not hex") }
        return (file, credential)
    }

    /// A registration signed with the server key that was never enrolled.
    func signedOnly(_ device: String) -> [UInt8] {
        let signer = CredentialSigner(serverKey: deployment.deployment.serverKey, purpose: CredentialSigner.registrationPurpose)
        let now = UInt64(Date().timeIntervalSince1970 * 1000)
        return Registration(deviceID: device, user: "alice", tags: [], issuedAt: now, expiresAt: now + 86_400_000).signed(by: signer)
    }

    func revoke(_ device: String) throws {
        let result = try SecurePushBinary.run(["device", "revoke", device, "--data-dir", directory])
        guard result.status == 0 else { throw ServiceError.failed("device revoke: \(result.stderr)") }
    }

    func hello(_ credential: [UInt8]) throws -> (BlockingWireClient, Message) {
        guard let gateway else { throw ServiceError.failed("no gateway") }
        let client = try gateway.connect()
        return (client, try client.hello(Hello(role: .device, credential: credential)))
    }

    /// A device connected once the gateway has loaded the registry (BUSY until then).
    func connected(_ credential: [UInt8], timeoutSeconds: Double = 15) throws -> BlockingWireClient {
        var last: Message?
        var client: BlockingWireClient?
        // A device retries BUSY with backoff too; a tight loop would only fill the log.
        waitUntil(timeoutSeconds: timeoutSeconds, pollMilliseconds: 100) {
            if let attempt = try? hello(credential) {
                last = attempt.1
                if case .helloOK = attempt.1 { client = attempt.0 }
            }
            return client != nil
        }
        guard let client else { throw ServiceError.failed("device HELLO: \(String(describing: last))") }
        return client
    }

    func provider() throws -> BlockingWireClient {
        guard let gateway else { throw ServiceError.failed("no gateway") }
        let client = try gateway.connect()
        let reply = try client.hello(Hello(role: .provider, credential: deployment.providerCredential(for: .gateway)))
        guard case .helloOK = reply else { throw ServiceError.failed("provider HELLO refused: \(reply)") }
        return client
    }

    func push(_ target: PushTarget, id: String, via provider: BlockingWireClient) throws -> PushAck {
        let reply = try provider.request(.push(Push(target: target, id: Array(id.utf8), ttlSeconds: 600)))
        guard case .pushAck(let ack) = reply else { throw ServiceError.failed("PUSH refused: \(reply)") }
        return ack
    }

    deinit {
        _ = gateway?.terminate()
        stopStore()
    }
}

@Suite("The gateway binary following the store's registry (needs the store side of the registry)", .ownThread, .serialized)
struct GatewayRegistryProcessTests {
    @Test("[7.4-4] a revoked registration is refused at HELLO")
    func revokedRefused() throws {
        let setup = try RegistryDeployment()
        try setup.startStore()
        let phone = try setup.enroll("phone")
        try setup.startGateway()
        _ = try setup.connected(phone.credential)
        try setup.revoke("phone")
        let refused = waitUntil(timeoutSeconds: 10) {
            (try? setup.hello(phone.credential).1) == .error(ErrorReply(status: .badCredentials, message: "registration revoked"))
        }
        #expect(refused)
        let (_, stranger) = try setup.hello(setup.signedOnly("never-enrolled"))
        #expect(stranger == .error(ErrorReply(status: .badCredentials, message: "registration not enrolled")),
                "signed with the server key but never enrolled")
    }

    @Test("[7.4-6] `device revoke` closes the live connection with GOAWAY REVOKED within seconds")
    func liveConnectionClosed() throws {
        let setup = try RegistryDeployment()
        try setup.startStore()
        let phone = try setup.enroll("phone")
        try setup.startGateway()
        let client = try setup.connected(phone.credential)
        try setup.revoke("phone")
        guard case .goaway(let goaway) = try client.nextPush(timeoutMs: 8_000).message else {
            Issue.record("no GOAWAY after the revocation")
            return
        }
        #expect(goaway.status == .revoked)
        let log = setup.gateway?.standardErrorText() ?? ""
        #expect(log.contains("registration revoked"))
    }

    @Test("[4.13-7] a push to an enrolled device that never connected is queued and delivered when it connects; a tag reaches it too")
    func offlineEnrolled() throws {
        let setup = try RegistryDeployment()
        try setup.startStore()
        let phone = try setup.enroll("phone", tags: ["news"])
        _ = try setup.enroll("tablet", tags: ["news"])
        try setup.startGateway()
        _ = try setup.connected(setup.enroll("laptop").credential)  // waits for the registry to be loaded
        let provider = try setup.provider()
        #expect(try setup.push(.device("phone"), id: "direct", via: provider) == PushAck(written: 0, queued: 1))
        #expect(try setup.push(.tag("news"), id: "tagged", via: provider) == PushAck(written: 0, queued: 2))
        let client = try setup.connected(phone.credential)
        #expect(try [client.nextPushID(), client.nextPushID()] == ["direct", "tagged"])
    }

    @Test("[7.4-4] a gateway started before the store: BUSY and /readyz 503 until the store comes up, then it loads")
    func gatewayBeforeStore() throws {
        let setup = try RegistryDeployment()
        try setup.reserveStorePort()
        let phone = try setup.enroll("phone")
        try setup.startGateway(["--metrics", "127.0.0.1:0"])
        let metricsPort = try #require(setup.gateway?.announcedMetricsPort)
        let (_, early) = try setup.hello(phone.credential)
        #expect(early == .error(ErrorReply(status: .busy, message: "the gateway is loading its device registry; retry")))
        #expect(try HTTPGet.fetch(port: metricsPort, path: "/readyz").status == 503)
        try setup.startStore(port: setup.storePort)
        _ = try setup.connected(phone.credential, timeoutSeconds: 20)
        // Ready once every loop has loaded, which the phone's own loop may do first.
        #expect(waitUntil(timeoutSeconds: 10) { (try? HTTPGet.fetch(port: metricsPort, path: "/readyz").status) == 200 })
        let metrics = try HTTPGet.metrics(port: metricsPort)
        #expect(metrics.contains("securepush_gateway_registry_loaded 1"))
        #expect(metrics.contains("securepush_gateway_registry_entries{state=\"enrolled\"} 1"))
    }

    @Test("[7.4-6] `device run` stops with one line and a non-zero exit when its registration is revoked")
    func deviceRunStops() throws {
        let setup = try RegistryDeployment()
        try setup.startStore()
        let phone = try setup.enroll("phone")
        try setup.startGateway()
        try setup.connected(phone.credential).shutdownWrite()  // now the registry is loaded
        let gatewayPort = try #require(setup.gateway?.port)
        let device = try ChildProcess(executable: SecurePushBinary.path, arguments: [
            "device", "run", "--gateway", "127.0.0.1:\(gatewayPort)", "--store", "127.0.0.1:\(setup.storePort)",
            "--credential", phone.file, "--state-dir", setup.directory + "/phone-state",
        ])
        #expect(waitUntil(timeoutSeconds: 10) { device.standardError.contains("connected to the gateway") })
        try setup.revoke("phone")
        let status = device.wait(seconds: 15)
        #expect(status != nil && status != 0)
        #expect(device.standardError.contains("revoked"), "stderr: \(device.standardError)")
    }
}
