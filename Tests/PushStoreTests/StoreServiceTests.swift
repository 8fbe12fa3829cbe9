import Foundation
import Testing
import PushClient
import PushSecurity
import PushStore
import PushTestSupport
import PushWire

/// A store under test with users alice and bob, and clients in either role.
protocol StoreUnderTest {
    var deployment: TemporaryDeployment { get }
    var reachable: any ReachableService { get }
}

extension StoreUnderTest {
    func provider() throws -> BlockingWireClient {
        let client = try reachable.connect()
        let reply = try client.hello(Hello(role: .provider, credential: deployment.providerCredential(for: .store)))
        guard case .helloOK = reply else { throw ServiceError.failed("provider HELLO refused: \(reply)") }
        return client
    }

    /// A connection with role gateway, as a gateway following the registry opens one.
    func gateway() throws -> BlockingWireClient {
        let client = try reachable.connect()
        let reply = try client.hello(Hello(role: .gateway, credential: deployment.gatewayCredential()))
        guard case .helloOK = reply else { throw ServiceError.failed("gateway HELLO refused: \(reply)") }
        return client
    }

    func device() throws -> BlockingWireClient {
        let client = try reachable.connect()
        let reply = try client.hello(Hello(role: .device))
        guard case .helloOK = reply else { throw ServiceError.failed("device HELLO refused: \(reply)") }
        return client
    }

    /// A token from LOGIN, the device enrolled for the user first unless it is already; by
    /// default alice's "phone", or another user's "NAME-phone".
    func login(_ user: String, password: String? = nil, device: String? = nil) throws -> [UInt8] {
        let device = device ?? (user == "alice" ? "phone" : "\(user)-phone")
        try deployment.enrolledRegistration(device, user: user)
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

/// Where a store under test keeps its data: the suites that take it as an argument run
/// once per backend (PostgreSQL where its server binaries are installed).
enum Backend: String, CustomStringConvertible, CaseIterable, Sendable {
    case sqlite, postgres

    /// SQLite, and PostgreSQL when its tests run here.
    static var available: [Backend] { PostgresCluster.testsEnabled ? [.sqlite, .postgres] : [.sqlite] }

    var description: String { rawValue }

    /// A fresh database in the shared test cluster for PostgreSQL; nil for SQLite.
    func database() throws -> String? {
        switch self {
        case .sqlite: nil
        case .postgres: try PostgresCluster.shared().createDatabase()
        }
    }
}

/// A deployment with users alice and bob.
func deploymentWithUsers(commandLine: Bool = false, backend: Backend = .sqlite) throws -> TemporaryDeployment {
    let deployment = try TemporaryDeployment(commandLine: commandLine, database: try backend.database())
    try deployment.addUser("alice", password: "alice-pw")
    try deployment.addUser("bob", password: "bob-pw")
    return deployment
}

/// A store in this process, on a clock the test can move forward.
final class RunningStore: StoreUnderTest {
    let deployment: TemporaryDeployment
    let clock = ManualClock()
    private(set) var service: InProcessStore
    private let configure: (inout StoreConfiguration) -> Void

    init(_ backend: Backend = .sqlite, configure: @escaping (inout StoreConfiguration) -> Void = { _ in }) throws {
        deployment = try deploymentWithUsers(backend: backend)
        self.configure = configure
        service = try RunningStore.start(deployment, clock: clock, configure: configure)
    }

    private static func start(_ deployment: TemporaryDeployment, clock: ManualClock,
                              configure: (inout StoreConfiguration) -> Void) throws -> InProcessStore {
        try InProcessStore(deployment) {
            $0.clock = clock.wallMilliseconds
            configure(&$0)
        }
    }

    var reachable: any ReachableService { service }

    /// Drains the store and starts another on the same database (on another port).
    func restart() throws {
        service.stop()
        service = try RunningStore.start(deployment, clock: clock, configure: configure)
    }
}

func errorStatus(_ message: Message) -> Status? {
    switch message {
    case .error(let error): error.status
    case .goaway(let goaway): goaway.status
    default: nil
    }
}

@Suite("Store service over real sockets, in-process", .ownThread)
struct StoreServiceTests {
    @Test("[4.7-1] [4.8-1] [4.10-1] STORE, FETCH, ACK, then GONE, and a payload reaches only its own user", arguments: Backend.available)
    func wholeFlow(_ backend: Backend) throws {
        let store = try RunningStore(backend)
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

    @Test("[4.8-1] an expired token is TOKEN_EXPIRED; [4.7-4] an expired payload is GONE", arguments: Backend.available)
    func expiry(_ backend: Backend) throws {
        let store = try RunningStore(backend) { $0.settings.tokenLifetimeMs = 1_000 }
        let id = try store.store("short-lived", ttl: 1)
        let token = try store.login("alice")
        let device = try store.device()
        #expect(try device.request(.fetch(Fetch(id: id, token: token))).type == .fetchOK)
        store.clock.advance(byMs: 1_500)
        #expect(errorStatus(try device.request(.fetch(Fetch(id: id, token: token)))) == .tokenExpired)
        #expect(errorStatus(try device.request(.fetch(Fetch(id: id, token: try store.login("alice"))))) == .gone)
    }

    @Test("a restart keeps users, payloads and tokens", arguments: Backend.available)
    func restart(_ backend: Backend) throws {
        let store = try RunningStore(backend)
        let id = try store.store("survives restarts")
        let token = try store.login("alice")
        try store.restart()
        guard case .fetchOK(let fetched) = try store.device().request(.fetch(Fetch(id: id, token: token))) else {
            Issue.record("not kept"); return
        }
        #expect(fetched.payload == Array("survives restarts".utf8))
    }

    @Test("[5.1-2] frames before HELLO get GOAWAY HELLO_REQUIRED; [4.2-4] a forged provider key is refused", arguments: Backend.available)
    func handshake(_ backend: Backend) throws {
        let store = try RunningStore(backend)
        let early = try store.service.connect()
        try early.send(.ping)
        #expect(errorStatus(try early.receive().message) == .helloRequired)
        #expect(early.waitForClose())
        let forged = try store.service.connect()
        let credential = HelloCredential.provider(store.deployment.deployment.serverKey).make(for: .store, nowMs: UInt64(Date().timeIntervalSince1970 * 1000))
        #expect(errorStatus(try forged.hello(Hello(role: .provider, credential: credential))) == .badCredentials)
        #expect(forged.waitForClose())
        let old = try store.service.connect()
        #expect(errorStatus(try old.hello(Hello(role: .device, versionMin: 2, versionMax: 9))) == .unsupportedVersion)
        #expect(old.waitForClose())
    }

    @Test("every malformed vector gets its documented outcome while another connection keeps being served", arguments: Backend.available)
    func malformedVectors(_ backend: Backend) throws {
        let store = try RunningStore(backend)
        let failures = malformedVectorFailures(service: store.service, hello: { Hello(role: .device, maxFrame: UInt32($0)) },
                                               bystander: try store.device())
        #expect(failures.isEmpty, "\(failures)")
    }

    @Test("[5.3-2] a pipelined burst gets every reply back by correlation id", arguments: Backend.available)
    func pipelining(_ backend: Backend) throws {
        let store = try RunningStore(backend)
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

    @Test("[5.4-2] a silent connection is closed with GOAWAY TIMEOUT", arguments: Backend.available)
    func keepalive(_ backend: Backend) throws {
        let store = try RunningStore(backend) { $0.limits.keepaliveMs = 400 }
        let client = try store.device()
        var sawTimeout = false
        for _ in 0..<20 {
            guard let frame = try? client.receive(timeoutMs: 2_000) else { break }
            if case .goaway(let goaway) = frame.message, goaway.status == .timeout { sawTimeout = true; break }
            #expect(frame.message == .ping, "[5.4-1] the store pings an idle peer")
        }
        #expect(sawTimeout)
        #expect(client.waitForClose())
    }

    @Test("[5.5-1] a drain sends GOAWAY SHUTTING_DOWN and still answers what was accepted", arguments: Backend.available)
    func drain(_ backend: Backend) throws {
        let store = try RunningStore(backend)
        let provider = try store.provider()
        let last = try provider.send(.store(StoreRequest(user: "alice", payload: [1, 2, 3])))
        // Answered before the drain starts, so the STORE was accepted by then.
        #expect(try provider.request(.ping) == .pong)
        store.service.stop()
        var replies: [Message] = []
        while let frame = try? provider.receive(timeoutMs: 2_000) { replies.append(frame.message) }
        #expect(replies.contains { if case .goaway(let g) = $0 { return g.status == .shuttingDown && g.lastCorrelation >= last } else { return false } })
        #expect(replies.contains { $0.type == .storeOK })
        #expect(provider.waitForClose())
    }

    @Test("logs carry no payloads, passwords or tokens", arguments: Backend.available)
    func logsAreClean(_ backend: Backend) throws {
        let log = CapturedLog()
        let store = try RunningStore(backend) { $0.logger = log.logger(label: "securepush.store") }
        let id = try store.store("TOPSECRETPAYLOAD")
        let token = try store.login("alice")
        _ = try store.device().request(.fetch(Fetch(id: id, token: token)))
        _ = try store.device().request(.login(Login(user: "alice", password: Array("wrong-pw".utf8), deviceID: "phone")))
        store.service.stop()
        let logs = log.text
        #expect(logs.contains("store ready"))
        #expect(!logs.contains("TOPSECRETPAYLOAD"))
        #expect(!logs.contains("alice-pw") && !logs.contains("wrong-pw"))
        #expect(!logs.contains(token.hexString))
    }
}
