#if canImport(Glibc)
import Glibc
#endif
import PushClock
import PushEventLoop
import PushSecurity
import PushSession
import PushWire

/// What one client case works with: the harness's gateway and store on 127.0.0.1, the
/// device's registration and fetch token made with keys of the harness's own, a state
/// directory, the client process, and what it printed. Everything runs on the case's
/// thread: the loop turns only while the case waits (`wait`, `pause`).
final class ClientHarness {
    let options: ClientSuiteOptions
    let loop: EventLoop
    let log = WireLog()
    let store = HarnessStore()
    let gateway: HarnessGateway
    let storeServer: HarnessServer<HarnessStore>
    let gatewayServer: HarnessServer<HarnessGateway>
    let directory: String
    let stateDirectory: String
    let user: String
    let deviceID: String
    let registration: [UInt8]
    /// The token `giveToken` writes and the store accepts.
    let token: [UInt8]
    let tokenExpiresAt: UInt64
    private(set) var client: ClientProcess?
    /// Every process started in this case, the running one last.
    private(set) var processes: [ClientProcess] = []
    /// The provider key the harness's servers check provider credentials with (7.1-2).
    let providerKey: SecretKey
    private(set) var shown: [ShownNotification] = []
    private(set) var answers: [ProviderAnswer] = []
    private(set) var unreadableLines: [String] = []
    private var poller: LoopTimer?
    /// The numbers of the connections the case started from (`startAndConnect`,
    /// `storeConnection`): a client that needed a second try to get in is judged on the
    /// connection it got in on.
    var gatewayConnectionNumber = 1
    var storeConnectionNumber = 1

    init(options: ClientSuiteOptions, caseNumber: Int, runDirectory: String) throws(CaseStop) {
        self.options = options
        do { loop = try EventLoop() } catch { throw .fail("cannot create an event loop: \(error)") }
        directory = runDirectory + "/case-\(caseNumber)"
        stateDirectory = directory + "/state"
        guard mkdir(directory, 0o700) == 0, mkdir(stateDirectory, 0o700) == 0 else {
            throw .fail("cannot make \(stateDirectory): \(String(cString: strerror(errno)))")
        }
        user = "cf-user-\(caseNumber)"
        deviceID = "cf-device-\(caseNumber)"
        let serverKey: SecretKey
        do {
            serverKey = try SecretKey.generate()
            providerKey = try SecretKey.generate()
        } catch {
            throw .fail("cannot make a key: \(error)")
        }
        let now = Clocks.wallMilliseconds()
        registration = Registration(deviceID: deviceID, user: user, tags: [], issuedAt: now, expiresAt: now + 86_400_000)
            .signed(by: CredentialSigner(serverKey: serverKey, purpose: CredentialSigner.registrationPurpose))
        tokenExpiresAt = now + 3_600_000
        token = FetchToken(user: user, deviceID: deviceID, issuedAt: now, expiresAt: tokenExpiresAt)
            .signed(by: CredentialSigner(serverKey: serverKey, purpose: CredentialSigner.fetchTokenPurpose))
        gateway = HarnessGateway(registration: registration, providerKey: providerKey)
        store.providerCredential = HelloCredential.provider(providerKey)
        storeServer = try HarnessServer(loop: loop, service: .store, limits: options.storeLimits, handler: store, log: log)
        gatewayServer = try HarnessServer(loop: loop, service: .gateway, limits: options.gatewayLimits, handler: gateway, log: log)
        store.server = storeServer
        store.validToken = token
        gateway.server = gatewayServer
        try write(directory + "/registration", registration.hexString + "\n")
        try write(directory + "/provider.key", providerKey.fileText)
    }

    /// Stops the client and closes the servers and the loop.
    func finish() {
        for process in processes { process.stop() }
        poller?.cancel()
        storeServer.close()
        gatewayServer.close()
        loop.shutdown()
    }

    // MARK: the client

    var placeholderValues: [String: String] {
        ["gateway": gatewayServer.address, "store": storeServer.address, "credential": directory + "/registration",
         "state": stateDirectory, "device": deviceID, "user": user, "provider-key": directory + "/provider.key"]
    }

    /// Starts the client (again, after `stopClient`) with the same state directory.
    func startClient() throws(CaseStop) {
        let arguments: [String]
        do { arguments = try options.command.arguments(placeholderValues) } catch { throw .fail("\(error)") }
        let process = try ClientProcess(arguments: arguments, stdinPipe: options.kind == .provider)
        client = process
        processes.append(process)
        if poller == nil {
            poller = loop.schedule(after: .milliseconds(10), repeating: true) { [weak self] in self?.readOutput() }
        }
    }

    /// SIGTERM (or, `crash`, SIGKILL) to the running client; its last lines are read first.
    func stopClient(crash: Bool = false) {
        readOutput()
        guard let client else { return }
        if crash { client.kill() } else { client.stop() }
        readOutput()
        self.client = nil
    }

    /// Reads what the client printed since the last read (also done every 10 ms).
    func readOutput() {
        guard let client else { return }
        for (text, atMs) in client.poll() {
            if options.kind == .provider {
                if let answer = ProviderAnswer(text, atMs: atMs) { answers.append(answer) } else { unreadableLines.append(text) }
                continue
            }
            switch DeviceOutputLine(text, atMs: atMs) {
            case .shown(let notification): shown.append(notification)
            case .unreadable(let line): unreadableLines.append(line)
            }
        }
    }

    /// Sends a provider one command line (Appendix B.3).
    func command(_ line: String) throws(CaseStop) {
        guard let client, client.send(line) else { throw .fail("cannot write to the provider's stdin: it closed it or exited" + stderrNote) }
    }

    /// Sends a provider a command line if it still reads them; false once it has exited or
    /// closed its stdin (a provider that refused to start).
    func sendIfRunning(_ line: String) -> Bool { client?.send(line) ?? false }

    /// The client's exit status once it has exited on its own.
    var clientExitStatus: Int32? {
        guard let client, client.hasExited else { return nil }
        return client.exitStatus
    }

    /// Closes the provider's stdin: the end of its commands (Appendix B.3).
    func endInput() { client?.closeInput() }

    /// Waits for the client to exit on its own, reads its last lines and returns its exit status.
    func waitForExit(timeoutMs: Int64) throws(CaseStop) -> Int32 {
        guard let client else { throw .fail("the client is not running") }
        let deadline = Clocks.monotonicMilliseconds() + timeoutMs
        while !client.hasExited {
            guard Clocks.monotonicMilliseconds() < deadline else { throw .fail("the client did not exit within \(timeoutMs) ms" + stderrNote) }
            turn(untilMs: deadline)
        }
        readOutput()
        self.client = nil
        return client.exitStatus ?? -1
    }

    /// The answer with `tag`, once the provider has written it.
    func answer(_ tag: String) -> ProviderAnswer? { answers.first { $0.tag == tag } }

    /// Waits for the answer to the command tagged `tag`.
    @discardableResult
    func waitForAnswer(_ tag: String, timeoutMs: Int64? = nil) throws(CaseStop) -> ProviderAnswer {
        try wait("the provider wrote no answer line for `\(tag)`", timeoutMs: timeoutMs) { answer(tag) != nil }
        guard let found = answer(tag) else { throw .fail("no answer for `\(tag)`") }
        return found
    }

    /// The notifications shown for `id`, in order.
    func shown(_ id: PayloadID) -> [ShownNotification] { shown.filter { $0.id == id } }

    // MARK: the token

    /// Puts the harness's token in the state directory as SPEC 7.5-4 has it (atomically).
    func giveToken() throws(CaseStop) {
        try write(stateDirectory + "/fetch-token.harness", token.hexString + " \(tokenExpiresAt)\n")
        guard rename(stateDirectory + "/fetch-token.harness", stateDirectory + "/fetch-token") == 0 else {
            throw .fail("cannot put the token in place: \(String(cString: strerror(errno)))")
        }
    }

    /// Writes one of the case's files (the registration, say) in place of the harness's.
    func writeFile(_ name: String, _ text: String) throws(CaseStop) {
        try write(directory + "/" + name, text)
    }

    /// Sets the mode of a file the harness wrote beside the state directory.
    func setFileMode(_ name: String, _ mode: mode_t) throws(CaseStop) {
        guard chmod(directory + "/" + name, mode) == 0 else { throw .fail("cannot chmod \(name): \(String(cString: strerror(errno)))") }
    }

    /// The names in the state directory.
    func stateFiles() -> [String] {
        guard let handle = opendir(stateDirectory) else { return [] }
        defer { closedir(handle) }
        var names: [String] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != ".", name != ".." { names.append(name) }
        }
        return names
    }

    /// Writes a file of the state directory as the client would find it.
    func writeStateFile(_ name: String, _ text: String) throws(CaseStop) {
        try write(stateDirectory + "/" + name, text)
    }

    private func write(_ path: String, _ text: String) throws(CaseStop) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .fail("cannot write \(path): \(String(cString: strerror(errno)))") }
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        close(fd)
        guard written == bytes.count else { throw .fail("cannot write \(path)") }
    }

    // MARK: waiting

    /// Turns the loop until `done` holds; FAILs with `what` after `timeoutMs` (the run's
    /// reply timeout by default), or at once when the client exits.
    func wait(_ what: @autoclosure () -> String, timeoutMs: Int64? = nil, until done: () -> Bool) throws(CaseStop) {
        let deadline = Clocks.monotonicMilliseconds() + (timeoutMs ?? options.timeoutMs)
        while !done() {
            try checkAlive()
            guard Clocks.monotonicMilliseconds() < deadline else {
                throw .fail("\(what()) within \(timeoutMs ?? options.timeoutMs) ms" + stderrNote)
            }
            turn(untilMs: deadline)
        }
    }

    /// Turns the loop for `milliseconds`, whatever happens; FAILs if the client exits,
    /// unless `clientMayExit` (a device that stops for good after a revocation).
    func pause(_ milliseconds: Int64, clientMayExit: Bool = false) throws(CaseStop) {
        let deadline = Clocks.monotonicMilliseconds() + milliseconds
        while Clocks.monotonicMilliseconds() < deadline {
            if !clientMayExit { try checkAlive() }
            turn(untilMs: deadline)
        }
        if !clientMayExit { try checkAlive() }
    }

    private func turn(untilMs deadline: Int64) {
        let wake = loop.schedule(after: .milliseconds(max(1, min(20, deadline - Clocks.monotonicMilliseconds())))) {}
        loop.runOnce(blocking: true)
        wake.cancel()
    }

    private func checkAlive() throws(CaseStop) {
        guard let client, client.hasExited else { return }
        readOutput()
        self.client = nil
        throw .fail("the client exited (status \(client.exitStatus ?? -1)) during the case: \(client.standardErrorTail)")
    }

    /// What the servers saw and sent, one line an event, for `--trace`.
    var trace: [String] {
        let start = log.events.first?.atMs ?? 0
        return log.events.map { event in
            let what: String
            switch event.kind {
            case .opened: what = "connection opened"
            case .received(let header, let body, let message):
                what = "<- \(message.map { "\($0.type)" } ?? "frame type 0x\(String(header.rawType, radix: 16))") correlation \(header.correlation), \(body.count) body bytes" + (message == nil ? " (does not decode)" : "")
            case .unframed(let error): what = "<- bytes refused: \(error)"
            case .sent(let type, let correlation): what = "-> \(type.map { "\($0)" } ?? "raw bytes") correlation \(correlation)"
            case .closed(let reason): what = "connection closed (\(reason))"
            }
            return "+\(event.atMs - start) ms \(event.service) #\(event.connection) \(what)"
        }
    }

    /// The client's last stderr lines, for a FAIL's detail.
    var stderrNote: String {
        guard let process = processes.last else { return "" }
        return " (client stderr: \(process.standardErrorTail))"
    }

    // MARK: common steps

    /// Starts the client and waits until it holds a connection to the gateway and one to
    /// the store.
    @discardableResult
    func startAndConnect() throws(CaseStop) -> HarnessGateway.Peer {
        try startClient()
        try wait("the device did not connect to the gateway and the store") { gateway.device != nil && !store.peers.isEmpty }
        guard let device = gateway.device, let storePeer = store.peers.last else { throw .fail("the device's connections closed") }
        gatewayConnectionNumber = gatewayServer.serial(device)
        storeConnectionNumber = storeServer.serial(storePeer)
        return device
    }

    /// The client's newest connection to the store.
    func storeConnection() throws(CaseStop) -> HarnessStore.Peer {
        guard let peer = store.peers.last else { throw .fail("the client is not connected to the store") }
        storeConnectionNumber = storeServer.serial(peer)
        return peer
    }

    /// Waits until the client has said nothing to either server for `quietMs` (at most
    /// two seconds): the state a case starts acting from, after the connect's SYNC.
    func settle(quietMs: Int64 = 200) throws(CaseStop) {
        let giveUp = Clocks.monotonicMilliseconds() + 2_000
        while Clocks.monotonicMilliseconds() < giveUp {
            let last = log.received().last?.atMs ?? 0
            if Clocks.monotonicMilliseconds() - last >= quietMs { return }
            try pause(20)
        }
    }
}
