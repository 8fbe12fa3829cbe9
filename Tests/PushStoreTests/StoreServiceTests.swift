import Foundation
import Testing
import PushClient
import PushSecurity
import PushTestSupport
import PushWire

/// A store process with users alice and bob, and clients logged in as each role.
final class RunningStore {
    let deployment: TemporaryDeployment
    var service: ServiceProcess
    let extraArguments: [String]

    init(extraArguments: [String] = [], deployment: TemporaryDeployment? = nil) throws {
        self.deployment = try deployment ?? TemporaryDeployment()
        if deployment == nil {
            try self.deployment.addUser("alice", password: "alice-pw")
            try self.deployment.addUser("bob", password: "bob-pw")
        }
        self.extraArguments = extraArguments
        service = try ServiceProcess(["store", "--data-dir", self.deployment.directory] + extraArguments)
    }

    func restart() throws {
        service = try ServiceProcess(["store", "--data-dir", deployment.directory] + extraArguments)
    }

    func provider() throws -> BlockingWireClient {
        let client = try service.connect()
        let reply = try client.hello(Hello(role: .provider, credential: deployment.providerCredential()))
        guard case .helloOK = reply else { throw ServiceError.failed("provider HELLO refused: \(reply)") }
        return client
    }

    func device() throws -> BlockingWireClient {
        let client = try service.connect()
        let reply = try client.hello(Hello(role: .device))
        guard case .helloOK = reply else { throw ServiceError.failed("device HELLO refused: \(reply)") }
        return client
    }

    func login(_ user: String, password: String? = nil, device: String = "phone") throws -> [UInt8] {
        let reply = try self.device().request(.login(Login(user: user, password: Array((password ?? "\(user)-pw").utf8), deviceID: device)))
        guard case .loginOK(let ok) = reply else { throw ServiceError.failed("login refused: \(reply)") }
        return ok.token
    }

    func store(_ text: String, for user: String = "alice", readLimit: UInt32 = 0, ttl: UInt32 = 3600, via client: BlockingWireClient? = nil) throws -> PayloadID {
        let reply = try (client ?? provider()).request(.store(StoreRequest(user: user, payload: Array(text.utf8), ttlSeconds: ttl, readLimit: readLimit)))
        guard case .storeOK(let ok) = reply else { throw ServiceError.failed("STORE refused: \(reply)") }
        return ok.id
    }
}

func errorStatus(_ message: Message) -> Status? {
    switch message {
    case .error(let error): error.status
    case .goaway(let goaway): goaway.status
    default: nil
    }
}

@Suite("Store service over real sockets", .serialized)
struct StoreServiceTests {
    @Test("[4.7-1] [4.8-1] [4.10-1] STORE, FETCH, ACK, then GONE, and a payload reaches only its own user")
    func wholeFlow() throws {
        let store = try RunningStore()
        let id = try store.store("the launch code is 0000", readLimit: 1)
        let device = try store.device()
        let alice = try store.login("alice")
        let bob = try store.login("bob")
        #expect(errorStatus(try device.request(.fetch(Fetch(id: id, token: bob)))) == .forbidden)
        guard case .fetchOK(let fetched) = try device.request(.fetch(Fetch(id: id, token: alice))) else {
            Issue.record("FETCH failed"); return
        }
        #expect(fetched.payload == Array("the launch code is 0000".utf8))
        #expect(try device.request(.ack(Ack(id: id, token: alice))) == .ackOK(AckOK(id: id)))
        #expect(errorStatus(try device.request(.fetch(Fetch(id: id, token: alice)))) == .gone)
        #expect(errorStatus(try device.request(.fetch(Fetch(id: id, token: nil)))) == .authRequired)
        #expect(errorStatus(try device.request(.fetch(Fetch(id: PayloadID.random(), token: alice)))) == .notFound)
        var forged = alice
        forged[3] ^= 0x20
        #expect(errorStatus(try device.request(.fetch(Fetch(id: id, token: forged)))) == .badToken)
        #expect(errorStatus(try store.device().request(.login(Login(user: "alice", password: Array("nope".utf8), deviceID: "x")))) == .badCredentials)
        let provider = try store.provider()
        #expect(errorStatus(try provider.request(.store(StoreRequest(user: "carol", payload: [1])))) == .unknownUser)
        #expect(errorStatus(try provider.request(.store(StoreRequest(user: "alice", payload: Array(repeating: 1, count: 4097))))) == .tooLarge)
        #expect(errorStatus(try provider.request(.fetch(Fetch(id: id, token: alice)))) == .forbidden)
        #expect(errorStatus(try device.request(.store(StoreRequest(user: "alice", payload: [1])))) == .forbidden)
        guard case .statusOK(let status) = try provider.request(.status(StatusRequest(id: id))) else { Issue.record("STATUS"); return }
        #expect(status.state == .gone && status.fetchCount == 1)
    }

    @Test("[4.8-1] an expired token is TOKEN_EXPIRED; [4.7-4] an expired payload is GONE")
    func expiry() throws {
        let store = try RunningStore(extraArguments: ["--token-lifetime", "1"])
        let id = try store.store("short-lived", ttl: 1)
        let token = try store.login("alice")
        let device = try store.device()
        #expect(try device.request(.fetch(Fetch(id: id, token: token))).type == .fetchOK)
        Thread.sleep(forTimeInterval: 1.2)
        #expect(errorStatus(try device.request(.fetch(Fetch(id: id, token: token)))) == .tokenExpired)
        #expect(errorStatus(try device.request(.fetch(Fetch(id: id, token: try store.login("alice"))))) == .gone)
    }

    @Test("a restart keeps users, payloads and tokens")
    func restart() throws {
        let store = try RunningStore()
        let id = try store.store("survives restarts")
        let token = try store.login("alice")
        #expect(store.service.terminate() == 0)
        try store.restart()
        guard case .fetchOK(let fetched) = try store.device().request(.fetch(Fetch(id: id, token: token))) else {
            Issue.record("not kept"); return
        }
        #expect(fetched.payload == Array("survives restarts".utf8))
    }

    @Test("[5.1-2] frames before HELLO get GOAWAY HELLO_REQUIRED; [4.2-4] a forged provider key is refused")
    func handshake() throws {
        let store = try RunningStore()
        let early = try store.service.connect()
        try early.send(.ping)
        #expect(errorStatus(try early.receive().message) == .helloRequired)
        #expect(early.waitForClose())
        let forged = try store.service.connect()
        let credential = ProviderCredential.make(providerKey: store.deployment.deployment.serverKey, nowMs: UInt64(Date().timeIntervalSince1970 * 1000))
        #expect(errorStatus(try forged.hello(Hello(role: .provider, credential: credential))) == .badCredentials)
        #expect(forged.waitForClose())
        let old = try store.service.connect()
        #expect(errorStatus(try old.hello(Hello(role: .device, versionMin: 2, versionMax: 9))) == .unsupportedVersion)
        #expect(old.waitForClose())
    }

    @Test("every malformed vector gets its documented outcome while another connection keeps being served")
    func malformedVectors() throws {
        let store = try RunningStore()
        let failures = malformedVectorFailures(service: store.service, hello: { Hello(role: .device, maxFrame: UInt32($0)) },
                                               bystander: try store.device())
        #expect(failures.isEmpty, "\(failures)")
    }

    @Test("[5.3-2] a pipelined burst gets every reply back by correlation id")
    func pipelining() throws {
        let store = try RunningStore()
        let provider = try store.provider()
        var sent: [UInt32] = []
        for index in 0..<500 {
            sent.append(try provider.send(.store(StoreRequest(user: index % 2 == 0 ? "alice" : "bob", payload: Array("n\(index)".utf8)))))
        }
        var received = Set<UInt32>()
        for _ in sent {
            let reply = try provider.receive()
            #expect(reply.message.type == .storeOK)
            received.insert(reply.header.correlation)
        }
        #expect(received == Set(sent))
    }

    @Test("[5.4-2] a silent connection is closed with GOAWAY TIMEOUT")
    func keepalive() throws {
        let store = try RunningStore(extraArguments: ["--keepalive-ms", "400"])
        let client = try store.device()
        var sawTimeout = false
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline {
            guard let frame = try? client.receive(timeoutMs: 2_000) else { break }
            if case .goaway(let goaway) = frame.message, goaway.status == .timeout { sawTimeout = true; break }
            #expect(frame.message == .ping, "[5.4-1] the store pings an idle peer")
        }
        #expect(sawTimeout)
        #expect(client.waitForClose())
    }

    @Test("[5.5-1] SIGTERM sends GOAWAY SHUTTING_DOWN, answers what was accepted and exits 0")
    func gracefulStop() throws {
        let store = try RunningStore()
        let provider = try store.provider()
        let last = try provider.send(.store(StoreRequest(user: "alice", payload: [1, 2, 3])))
        #expect(store.service.terminate() == 0)
        var replies: [Message] = []
        while let frame = try? provider.receive(timeoutMs: 1_000) { replies.append(frame.message) }
        #expect(replies.contains { if case .goaway(let g) = $0 { return g.status == .shuttingDown && g.lastCorrelation == last } else { return false } })
        #expect(replies.contains { $0.type == .storeOK })
    }

    @Test("logs carry no payloads, passwords or tokens")
    func logsAreClean() throws {
        let store = try RunningStore(extraArguments: ["--log-level", "trace"])
        let id = try store.store("TOPSECRETPAYLOAD")
        let token = try store.login("alice")
        _ = try store.device().request(.fetch(Fetch(id: id, token: token)))
        _ = store.service.terminate()
        let logs = store.service.standardErrorText()
        #expect(!logs.isEmpty)
        #expect(!logs.contains("TOPSECRETPAYLOAD"))
        #expect(!logs.contains("alice-pw"))
        #expect(!logs.contains(token.hexString))
    }
}
