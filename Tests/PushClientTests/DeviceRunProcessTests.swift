import Foundation
import PushClient
import PushClock
import PushEventLoop
import PushProcess
import PushSecurity
import PushSession
import PushStore
import PushStoreLogic
import PushTestSupport
import PushWire
import Testing

/// A file another process appends to, read from where the last read stopped.
final class GrowingFile {
    let path: String
    private var handle: FileHandle?
    private var partial: [UInt8] = []
    private(set) var lineCount = 0

    init(path: String) { self.path = path }

    /// Reads what was appended since the last call and counts the whole lines in it.
    func refresh() {
        if handle == nil { handle = FileHandle(forReadingAtPath: path) }
        guard let handle, let data = try? handle.readToEnd(), !data.isEmpty else { return }
        lineCount += data.reduce(0) { $1 == UInt8(ascii: "\n") ? $0 + 1 : $0 }
    }

    deinit { try? handle?.close() }
}

/// `securepush device run` as a child process, in a state directory of its own, logged in
/// with `securepush device login` before it starts.
final class DeviceRunProcess {
    let child: ChildProcess
    let stateDirectory: String
    let output: GrowingFile
    private let runArguments: [String]

    /// - Parameters:
    ///   - registration: the device's credential; written to a file as `device enroll` does.
    ///   - extra: flags for both `device login` and `device run` (`--ca-file FILE` for TLS).
    ///   - loginExtra: flags for `device login` alone (`--key-suite xwing`).
    init(deployment: TemporaryDeployment, device: String, user: String, password: String,
         registration: [UInt8], store: any ReachableService, gatewayAddress: String, extra: [String] = [],
         loginExtra: [String] = []) throws {
        stateDirectory = deployment.directory + "/state-" + device
        try FileManager.default.createDirectory(atPath: stateDirectory, withIntermediateDirectories: true)
        let credential = stateDirectory + "/device.cred"
        try Deployment.writePrivate(credential, registration.map { String(format: "%02x", $0) }.joined() + "\n")
        let storeAddress = "\(store.host):\(store.port)"
        let login = try SecurePushBinary.run(["device", "login", "--store", storeAddress, "--user", user, "--device", device,
                                              "--state-dir", stateDirectory] + extra + loginExtra, stdin: password + "\n")
        guard login.status == 0 else { throw ServiceError.failed("device login: \(login.stderr)") }
        runArguments = ["device", "run", "--gateway", gatewayAddress, "--store", storeAddress,
                        "--credential", credential, "--state-dir", stateDirectory] + extra
        child = try ChildProcess(executable: SecurePushBinary.path, arguments: runArguments)
        output = GrowingFile(path: child.stdoutPath)
    }

    /// `device run` started again as `previous` was, with its state directory (stop that one first).
    init(restarting previous: DeviceRunProcess) throws {
        stateDirectory = previous.stateDirectory
        runArguments = previous.runArguments
        child = try ChildProcess(executable: SecurePushBinary.path, arguments: runArguments)
        output = GrowingFile(path: child.stdoutPath)
    }

    /// Notification lines printed so far (the process prints nothing else on stdout).
    var shownCount: Int {
        output.refresh()
        return output.lineCount
    }

    var token: [UInt8]? { TokenStore(directory: stateDirectory).load()?.token }

    /// How often stderr says the device connected to the gateway.
    var gatewayConnections: Int {
        child.standardError.components(separatedBy: "connected to the gateway").count - 1
    }

    /// SIGTERM, then every notification it printed: the ID (hex) and the text, in order.
    func stopAndCollect() -> [(id: String, text: String)] {
        child.terminate(graceSeconds: 10)
        return child.standardOutput.split(separator: "\n").map { line in
            // HH:MM:SS ID TEXT
            let parts = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
            return parts.count == 3 ? (String(parts[1]), String(parts[2])) : ("", String(line))
        }
    }
}

/// IDs shown more than once, IDs never shown, IDs shown that were not expected, and wrong texts.
func deliveryProblems(shown: [(id: String, text: String)], expected: [String: String]) -> [String] {
    var counts: [String: Int] = [:]
    var problems: [String] = []
    for (id, text) in shown {
        counts[id, default: 0] += 1
        if let wanted = expected[id], wanted != text { problems.append("\(id): wrong text") }
    }
    let duplicates = counts.filter { $0.value > 1 }
    if !duplicates.isEmpty { problems.append("\(duplicates.count) IDs shown more than once") }
    let missing = expected.keys.filter { counts[$0] == nil }
    if !missing.isEmpty { problems.append("\(missing.count) of \(expected.count) IDs never shown") }
    let unexpected = counts.keys.filter { expected[$0] == nil }
    if !unexpected.isEmpty { problems.append("\(unexpected.count) lines that are no expected notification: \(unexpected.prefix(3))") }
    return Array(problems.prefix(10))
}

/// Whether the store lists nothing unread for the token's device: every shown payload was acknowledged.
func nothingUnread(store: any ReachableService, token: [UInt8]?) -> Bool {
    guard let token, let client = try? store.connect(), case .helloOK? = try? client.hello(Hello(role: .device)),
          case .syncOK(let page)? = try? client.request(.sync(Sync(token: token, cursor: 0, limit: 1))) else { return false }
    return page.ids.isEmpty
}

/// How many ids the store lists unread for the token's device: one SYNC page of 1 and the
/// older ones it counts ([4.9-5]); nil if it cannot be asked.
func unreadCount(store: any ReachableService, token: [UInt8]?) -> Int? {
    guard let token, let client = try? store.connect(), case .helloOK? = try? client.hello(Hello(role: .device)),
          case .syncOK(let page)? = try? client.request(.sync(Sync(token: token, cursor: 0, limit: 1))) else { return nil }
    return page.ids.count + Int(page.olderCount)
}

/// A gateway process on a given port of 127.0.0.1, so it can be restarted where devices look for it.
func startGateway(dataDirectory: String, port: Int) throws -> (ChildProcess, Int) {
    var lastError: (any Error)?
    // A restart on the same port can lose a race for it; try again rather than fail the test.
    for _ in 0..<3 {
        do {
            let child = try ChildProcess(executable: SecurePushBinary.path,
                                         arguments: ["gateway", "--data-dir", dataDirectory, "--listen", "127.0.0.1:\(port)"])
            let address = try child.waitForLine(prefix: "listening on ", seconds: 30)
            guard let bound = Int(address.split(separator: ":").last ?? "") else { throw ServiceError.failed("bad address \(address)") }
            return (child, bound)
        } catch {
            lastError = error
        }
    }
    throw lastError ?? ServiceError.failed("the gateway did not start")
}

@Suite("securepush device run, as a process", .ownThread, .serialized)
struct DeviceRunProcessTests {
    @Test("[4.9-5] [4.9-1] a backlog of 10,000 payloads of the largest size: `device run` shows the newest 500 at once, each exactly once, and says in one line that 9,500 older ones were not shown, rather than pulling them all")
    func backlogNewestShown() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let store = try ServiceProcess(["store", "--data-dir", deployment.directory])
        let gateway = try ServiceProcess(["gateway", "--data-dir", deployment.directory])
        let payloadBytes = StoreSettings().maxPayloadBytes
        let count = 10_000

        // The backlog, STOREd in pipelined batches before the device starts.
        let provider = try store.connect(timeoutMs: 30_000)
        guard case .helloOK = try provider.hello(Hello(role: .provider, credential: deployment.providerCredential(for: .store))) else {
            Issue.record("the store refused the provider"); return
        }
        var expected: [String: String] = [:]
        for batch in stride(from: 0, to: count, by: 500) {
            var texts: [UInt32: String] = [:]
            for index in batch..<min(batch + 500, count) {
                let head = "backlog \(index) "
                let text = head + String(repeating: "x", count: payloadBytes - head.utf8.count)
                texts[try provider.send(.store(StoreRequest(user: "alice", payload: Array(text.utf8))))] = text
            }
            for _ in 0..<texts.count {
                let reply = try provider.receive(timeoutMs: 30_000)
                guard case .storeOK(let ok) = reply.message, let text = texts[reply.header.correlation] else {
                    Issue.record("STORE failed: \(reply.message)"); return
                }
                expected[ok.id.hex] = text
            }
        }
        #expect(expected.count == count)

        let started = Clocks.monotonicMilliseconds()
        let device = try DeviceRunProcess(deployment: deployment, device: "phone", user: "alice", password: "alice-pw",
                                          registration: deployment.registration("phone"), store: store,
                                          gatewayAddress: "127.0.0.1:\(gateway.port)")
        let page = 500
        // A guard against a hang, not a performance assertion.
        let shownPage = waitUntil(timeoutSeconds: 50) { device.shownCount >= page }
        let elapsedMs = Clocks.monotonicMilliseconds() - started
        #expect(shownPage, "\(device.shownCount) of \(page) shown; stderr: \(device.child.standardErrorTail)")
        print("device run showed \(device.shownCount) payloads of \(payloadBytes) bytes in \(elapsedMs) ms")
        #expect(waitUntil(timeoutSeconds: 30) { device.child.standardError.contains("\(count - page) older unread notifications not shown") },
                "one line for the older ones; stderr: \(device.child.standardErrorTail)")
        // What it showed is acknowledged, and the older ones stay unread at the store.
        #expect(waitUntil(timeoutSeconds: 30) { unreadCount(store: store, token: device.token) == count - page })
        let shown = device.stopAndCollect()
        let newest = expected.filter { id, text in (count - page..<count).contains(where: { text.hasPrefix("backlog \($0) ") }) }
        #expect(newest.count == page)
        #expect(deliveryProblems(shown: shown, expected: newest) == [], "the newest \(page), each once")
        #expect(shown.count == page, "nothing older pulled")
        #expect(!device.child.standardError.contains("store connection lost"), "the store never cut the device")
    }

    @Test("the gateway SIGKILLed and restarted five times while 600 secure pushes flow: `device run` shows every stored payload exactly once")
    func gatewayKilledUnderLoad() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let store = try ServiceProcess(["store", "--data-dir", deployment.directory])
        let first = try startGateway(dataDirectory: deployment.directory, port: 0)
        var gateway = first.0
        let port = first.1
        defer { gateway.killHard() }
        let device = try DeviceRunProcess(deployment: deployment, device: "phone", user: "alice", password: "alice-pw",
                                          registration: deployment.registration("phone"), store: store,
                                          gatewayAddress: "127.0.0.1:\(port)")
        #expect(waitUntil(timeoutSeconds: 30) { device.gatewayConnections >= 1 })

        let loop = try EventLoop()
        let storeLink = ServerLink(loop: loop, endpoint: .init(host: store.host, port: store.port)) {
            Hello(role: .provider, credential: deployment.providerCredential(for: .store), name: "test-provider")
        }
        let gatewayLink = ServerLink(loop: loop, endpoint: .init(host: "127.0.0.1", port: port)) {
            Hello(role: .provider, credential: deployment.providerCredential(for: .gateway), name: "test-provider")
        }
        defer {
            storeLink.stop()
            gatewayLink.stop()
            loop.shutdown()
        }
        storeLink.start()
        gatewayLink.start()

        let total = 600
        var started = 0
        var inFlight = 0
        var expected: [String: String] = [:]
        var pushesAcknowledged = 0
        var pushesFailed = 0
        // 16 sends in flight: STORE, then PUSH of its ID to alice's devices.
        func pump() {
            while inFlight < 16, started < total {
                let text = "secure push \(started)"
                started += 1
                inFlight += 1
                storeLink.request(.store(StoreRequest(user: "alice", payload: Array(text.utf8)))) { result in
                    guard case .success(.storeOK(let ok)) = result else {
                        inFlight -= 1
                        return pump()
                    }
                    expected[ok.id.hex] = text
                    gatewayLink.request(.push(Push(target: .user("alice"), id: ok.id.bytes))) { result in
                        if case .success(.pushAck) = result { pushesAcknowledged += 1 } else { pushesFailed += 1 }
                        inFlight -= 1
                        pump()
                    }
                }
            }
        }
        pump()
        let kills = 5
        for kill in 1...kills {
            #expect(loop.run(until: { expected.count >= kill * total / (kills + 1) }, timeoutSeconds: 30))
            gateway.killHard()
            (gateway, _) = try startGateway(dataDirectory: deployment.directory, port: port)
            // Sends go on while the device comes back, so every kill cuts a connected device.
            #expect(loop.run(until: { device.gatewayConnections > kill }, timeoutSeconds: 30), "the device reconnected after kill \(kill)")
        }
        #expect(loop.run(until: { started == total && inFlight == 0 }, timeoutSeconds: 60))
        #expect(expected.count == total, "every STORE was acknowledged")
        #expect(waitUntil(timeoutSeconds: 60) { device.shownCount >= expected.count },
                "\(device.shownCount) of \(expected.count) shown; stderr: \(device.child.standardErrorTail)")
        #expect(waitUntil(timeoutSeconds: 30) { nothingUnread(store: store, token: device.token) }, "every shown payload was acknowledged")
        let connections = device.gatewayConnections
        print("gateway killed \(kills) times; device connected to the gateway \(connections) times; "
              + "pushes acknowledged \(pushesAcknowledged), failed \(pushesFailed)")
        #expect(connections >= kills + 1, "the device came back after every kill")
        let shown = device.stopAndCollect()
        #expect(deliveryProblems(shown: shown, expected: expected) == [])
    }
}
