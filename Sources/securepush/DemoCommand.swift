import ArgumentParser
import Foundation
import PushClient
import PushClock
import PushEventLoop
import PushProcess
import PushSecurity
import PushSession
import PushStore
import PushStoreSQLite
import PushWire

struct DemoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "The whole secure-push flow, step by step, in a temporary deployment; cleans up and exits 0.")

    @Option(help: "Seconds each step may take before the demo gives up.") var stepTimeout = 15.0

    func run() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("securepush-demo-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let script = try DemoScript(directory: directory, stepTimeout: stepTimeout)
        defer { script.cleanUp() }
        try script.run()
    }
}

/// The demo's steps, run on one event loop against a real store and gateway.
final class DemoScript {
    let directory: String
    let stepTimeout: Double
    let loop: EventLoop
    var services: [ChildProcess] = []
    var storeAddress = HostPort(argument: "127.0.0.1:0")!
    var gatewayAddress = HostPort(argument: "127.0.0.1:0")!
    let deployment: Deployment
    var devices: [String: DeviceClient] = [:]
    /// Each device's registration, as `securepush device enroll` records and writes it.
    var registrations: [String: [UInt8]] = [:]
    var shown: [String: [DeviceNotification]] = [:]
    var provider: ProviderClient?
    static let password = Array("correct horse battery staple".utf8)

    init(directory: String, stepTimeout: Double) throws {
        self.directory = directory
        self.stepTimeout = stepTimeout
        loop = try EventLoop()
        deployment = try Deployment.create(at: directory)
    }

    func say(_ line: String) { announce(line) }

    func run() throws {
        say("== securepush demo: only an ID travels on the push path ==")
        say("")
        say("1. A deployment in \(directory): keys, a user, two enrolled devices.")
        let hash = try PasswordHash.make(password: DemoScript.password, iterations: 10_000)
        let users = try SQLitePayloadWriter(path: StoreFiles.databasePath(directory))
        _ = try users.addUser("alice", passwordHash: hash.encoded, nowMs: Clocks.wallMilliseconds())
        try enroll("alice-phone")
        try enroll("alice-tablet")
        say("   user alice; devices alice-phone and alice-tablet enrolled in the store's registry")

        storeAddress = try startService(["store", "--data-dir", directory, "--listen", "127.0.0.1:0", "--log-level", "warning"])
        gatewayAddress = try startService(["gateway", "--data-dir", directory, "--listen", "127.0.0.1:0", "--store", storeAddress.description,
                                           "--log-level", "warning"])
        say("   store on \(storeAddress), gateway on \(gatewayAddress), following the store's device registry")

        say("")
        say("2. Both devices connect; only alice-phone logs in.")
        startDevice("alice-phone")
        startDevice("alice-tablet")
        try wait("both devices connected") { self.devices.count == 2 && self.connected.count == 2 }
        try login("alice-phone")

        say("")
        say("3. The provider stores a secret and pushes its ID.")
        let first = try send("Your one-time code is 493817", to: .user("alice"))
        say("   store  -> provider: id \(first.id.hex) (acknowledged only once it is on disk)")
        say("   gateway-> provider: written to \(first.delivery.written) device(s), queued for \(first.delivery.queued)")
        try wait("the push on both devices") { self.pushes.filter { $0.1 == first.id.bytes }.count >= 2 }
        for (device, id, size) in pushes where id == first.id.bytes {
            say("   gateway-> \(device): PUSH with id \(id.hexString) only, \(size) bytes on the wire, no payload field")
        }
        try wait("alice-phone to show the text") { self.text(on: "alice-phone", for: first.id) != nil }
        say("   alice-phone fetched with its token: \"\(text(on: "alice-phone", for: first.id) ?? "")\"")
        try wait("alice-tablet's generic notification") { self.isGeneric(on: "alice-tablet", for: first.id) }
        say("   alice-tablet has no token, so it shows: \"\(DeviceClient.genericText)\" and keeps the ID")

        say("")
        say("4. alice-tablet logs in and fetches what it kept.")
        try login("alice-tablet")
        try wait("alice-tablet to show the text") { self.text(on: "alice-tablet", for: first.id) != nil }
        say("   alice-tablet: \"\(text(on: "alice-tablet", for: first.id) ?? "")\"")

        say("")
        say("5. alice-tablet goes offline; a message for it waits at the gateway.")
        devices["alice-tablet"]?.stop()
        devices["alice-tablet"] = nil
        connected.remove("alice-tablet")
        let offlineSince = Clocks.monotonicMilliseconds()
        try wait("the gateway to see alice-tablet leave") { Clocks.monotonicMilliseconds() - offlineSince > 300 }
        let second = try send("Meeting moved to 15:00", to: .device("alice-tablet"))
        say("   gateway-> provider: written to \(second.delivery.written), queued for \(second.delivery.queued) offline device")
        say("   alice-tablet reconnects...")
        startDevice("alice-tablet")
        try wait("the queued push to arrive") { self.text(on: "alice-tablet", for: second.id) != nil }
        say("   alice-tablet: \"\(text(on: "alice-tablet", for: second.id) ?? "")\"")

        say("")
        say("Done: the payloads only ever travelled from the store to devices that proved who they are.")
    }

    // MARK: devices

    var connected: Set<String> = []
    var pushes: [(String, [UInt8], Int)] = []

    /// Records the device in the registry (LOGIN accepts enrolled devices only) and keeps
    /// its registration.
    func enroll(_ name: String) throws {
        let signer = CredentialSigner(serverKey: deployment.serverKey, purpose: CredentialSigner.registrationPurpose)
        let enrolment = try RegistryAdministration(databasePath: StoreFiles.databasePath(directory))
            .enroll(user: "alice", deviceID: name, tags: [], lifetimeMs: 86_400_000, nowMs: Clocks.wallMilliseconds(), signer: signer)
        registrations[name] = enrolment.registration.credential
    }

    func startDevice(_ name: String) {
        let registration = registrations[name] ?? []
        let tokens = TokenStore(directory: directory + "/" + name)
        let device = DeviceClient(loop: loop, gateway: ServerLink.Endpoint(host: gatewayAddress.host, port: gatewayAddress.port),
                                  store: ServerLink.Endpoint(host: storeAddress.host, port: storeAddress.port),
                                  registration: registration, deviceID: name, tokenStore: tokens)
        device.onNotification = { [unowned self] in self.shown[name, default: []].append($0) }
        device.onEvent = { [unowned self] event in
            switch event {
            case .gatewayConnected: self.connected.insert(name)
            case .pushReceived(let id, let size): self.pushes.append((name, id, size))
            default: break
            }
        }
        devices[name] = device
        device.start()
    }

    func login(_ name: String) throws {
        var done: Result<UInt64, ClientError>?
        devices[name]?.login(user: "alice", password: DemoScript.password) { done = $0 }
        try wait("\(name) to log in") { done != nil }
        if case .failure(let error) = done { throw CommandFailure("\(name) could not log in: \(error)") }
        say("   \(name) logged in as alice; its fetch token is in its state directory")
    }

    func text(on device: String, for id: PayloadID) -> String? {
        shown[device]?.first { $0.id == id && $0.content != .generic }?.text
    }

    func isGeneric(on device: String, for id: PayloadID) -> Bool {
        shown[device]?.contains { $0.id == id && $0.content == .generic } ?? false
    }

    func send(_ text: String, to target: PushTarget) throws -> SendReceipt {
        if provider == nil {
            provider = ProviderClient(loop: loop, store: ServerLink.Endpoint(host: storeAddress.host, port: storeAddress.port),
                                      gateway: ServerLink.Endpoint(host: gatewayAddress.host, port: gatewayAddress.port),
                                      providerKey: deployment.providerKey)
        }
        var receipt: Result<SendReceipt, ClientError>?
        provider?.send(ProviderClient.SecureMessage(recipient: "alice", payload: Array(text.utf8), target: target)) { receipt = $0 }
        try wait("the send to finish") { receipt != nil }
        switch receipt {
        case .success(let sent)?: return sent
        case .failure(let error)?: throw CommandFailure("send failed: \(error)")
        case nil: throw CommandFailure("send did not finish")
        }
    }

    /// Runs the loop until `condition` holds, or fails the demo after the step timeout.
    func wait(_ what: String, _ condition: @escaping () -> Bool) throws {
        let deadline = Clocks.monotonicMilliseconds() + Int64(stepTimeout * 1000)
        let poll = loop.schedule(after: .milliseconds(10), repeating: true) { [loop] in
            if condition() || Clocks.monotonicMilliseconds() > deadline { loop.stop() }
        }
        if !condition() { loop.run() }
        poll.cancel()
        guard condition() else { throw CommandFailure("the demo timed out waiting for \(what)") }
    }

    // MARK: services

    func startService(_ arguments: [String]) throws -> HostPort {
        do {
            let child = try ChildProcess(executable: ChildProcess.currentExecutable, arguments: arguments)
            services.append(child)
            let address = try child.waitForLine(prefix: "listening on ", seconds: 30)
            guard let parsed = HostPort(argument: address) else { throw CommandFailure("\(arguments[0]) printed a bad address") }
            return parsed
        } catch let failure as ChildProcess.Failure {
            throw CommandFailure(failure.description)
        }
    }

    func cleanUp() {
        provider?.stop()
        for device in devices.values { device.stop() }
        devices = [:]
        for service in services { service.terminate(graceSeconds: 10) }
        loop.shutdown()
    }
}
