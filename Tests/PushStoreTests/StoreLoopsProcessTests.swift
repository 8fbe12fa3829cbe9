import Foundation
import PushClient
import PushSecurity
import PushTestSupport
import PushWire
import Testing

/// `securepush store --loops N` as a child process: N loops accept on one port, so the
/// connections of a test land on several of them. What a client sees must not depend on
/// which loop serves it.
private final class LoopedStore: StoreUnderTest {
    let deployment: TemporaryDeployment
    private(set) var service: ServiceProcess

    init(loops: Int, backend: Backend = .sqlite, _ flags: [String] = []) throws {
        deployment = try deploymentWithUsers(commandLine: true, backend: backend)
        service = try ServiceProcess(["store", "--data-dir", deployment.directory, "--loops", "\(loops)"] + flags)
    }

    var reachable: any ReachableService { service }

    func restart(loops: Int) throws {
        service = try ServiceProcess(["store", "--data-dir", deployment.directory, "--loops", "\(loops)"])
    }
}

@Suite("The store binary on several loops", .ownThread)
struct StoreLoopsProcessTests {
    @Test("[4.7] [4.8] [4.9] a payload stored through any connection is fetched and acknowledged through every other, and /metrics sums the loops",
          arguments: Backend.available)
    func storedOnOneLoopServedOnAll(backend: Backend) throws {
        let store = try LoopedStore(loops: 4, backend: backend, ["--metrics", "127.0.0.1:0"])
        let providers = try (0..<4).map { _ in try store.provider() }
        let devices = try (0..<8).map { _ in try store.device() }
        let token = try store.login("alice")
        var stored: [(PayloadID, String)] = []
        for (index, provider) in providers.enumerated() {
            for round in 0..<5 {
                let text = "payload \(index)-\(round)"
                stored.append((try store.store(text, via: provider), text))
            }
        }
        for device in devices {
            for (id, text) in stored {
                let reply = try device.request(.fetch(Fetch(id: id, token: token)))
                guard case .fetchOK(let ok) = reply else { Issue.record("FETCH of \(id) refused: \(reply)"); return }
                #expect(ok.payload == Array(text.utf8))
            }
        }
        // Each payload acknowledged once, through a device connection other than the last
        // that fetched it; a second ACK is idempotent wherever it arrives.
        for (offset, (id, _)) in stored.enumerated() {
            let first = devices[offset % devices.count], second = devices[(offset + 3) % devices.count]
            #expect(try first.request(.ack(Ack(id: id, token: token))).type == .ackOK)
            #expect(try second.request(.ack(Ack(id: id, token: token))).type == .ackOK)
        }
        let port = try #require(store.service.announcedMetricsPort)
        let metrics = try MetricsExposition(parsing: try HTTPGet.metrics(port: port))
        #expect(metrics.value("securepush_store_payloads_stored_total") == Double(stored.count))
        #expect(metrics.value("securepush_store_requests_total", ["type": "fetch", "status": "ok"]) == Double(stored.count * devices.count))
        #expect(metrics.value("securepush_store_requests_total", ["type": "ack", "status": "ok"]) == Double(stored.count * 2))
        #expect(metrics.histogramCount("securepush_store_request_duration_seconds", ["type": "store"]) == Double(stored.count))
        // Each loop reports its own readiness every 100 ms, so /readyz may lag a loop's
        // connections coming up by that much.
        var readiness: HTTPGetResult?
        #expect(waitUntil(timeoutSeconds: 10) {
            readiness = try? HTTPGet.fetch(port: port, path: "/readyz")
            return readiness?.status == 200
        }, "\(readiness?.body ?? "no answer")")
    }

    @Test("/readyz answers for every loop: with one loop's PostgreSQL connections down it is 503 naming that loop, and 200 once they are back",
          .enabled(if: PostgresCluster.testsEnabled, "PostgreSQL is not installed"))
    func readinessCoversEveryLoopsDatabaseConnections() throws {
        let cluster = try PostgresCluster.shared()
        let url = try cluster.createDatabase()
        let database = try #require(url.split(separator: "/").last.map(String.init))
        let deployment = try TemporaryDeployment(commandLine: true, database: url)
        let store = try ServiceProcess(["store", "--data-dir", deployment.directory, "--loops", "4", "--metrics", "127.0.0.1:0"])
        let port = try #require(store.announcedMetricsPort)
        func readyz() -> HTTPGetResult? { try? HTTPGet.fetch(port: port, path: "/readyz") }
        #expect(waitUntil { readyz()?.status == 200 })
        // pg_stat_activity names every connection by its loop: a write and a read each.
        for loop in 0..<4 {
            let names = try cluster.administer(
                "SELECT application_name FROM pg_stat_activity WHERE datname = '\(database)' "
                    + "AND application_name LIKE 'securepush store loop \(loop) %' ORDER BY 1")
            #expect(names == ["securepush store loop \(loop) read 1", "securepush store loop \(loop) write"])
        }
        // Loop 2 loses its connections and cannot connect again; the other loops keep theirs.
        try cluster.administer("ALTER DATABASE \(database) ALLOW_CONNECTIONS false")
        defer { _ = try? cluster.administer("ALTER DATABASE \(database) ALLOW_CONNECTIONS true") }
        let terminated = try cluster.administer(
            "SELECT pg_terminate_backend(pid)::text FROM pg_stat_activity WHERE datname = '\(database)' "
                + "AND application_name LIKE 'securepush store loop 2 %'")
        #expect(terminated == ["true", "true"])
        var notReady: HTTPGetResult?
        #expect(waitUntil {
            notReady = readyz()
            return notReady?.status == 503
        })
        #expect(notReady?.body.contains("loop 2:") == true, "\(notReady?.body ?? "no answer")")
        #expect(notReady?.body.contains("connection") == true, "\(notReady?.body ?? "no answer")")
        try cluster.administer("ALTER DATABASE \(database) ALLOW_CONNECTIONS true")
        #expect(waitUntil { readyz()?.status == 200 }, "\(readyz()?.body ?? "no answer")")
    }

    @Test("connections are spread over the loops in turn, whichever loop the kernel woke to accept them")
    func connectionsAreSpreadEvenly() throws {
        let store = try LoopedStore(loops: 2, ["--metrics", "127.0.0.1:0"])
        let clients = try (0..<4).map { _ in try store.provider() } + (0..<4).map { _ in try store.device() }
        #expect(try clients.allSatisfy { try $0.request(.ping) == .pong }, "each works on the loop it moved to")
        let port = try #require(store.service.announcedMetricsPort)
        let metrics = try MetricsExposition(parsing: try HTTPGet.metrics(port: port))
        #expect(metrics.value("securepush_store_loop_connections", ["loop": "0"]) == 4)
        #expect(metrics.value("securepush_store_loop_connections", ["loop": "1"]) == 4)
        #expect(metrics.value("securepush_store_connections") == 8)
    }

    @Test("[4.16-8] held REGISTRYs on every loop hear of a change; the change is counted and logged once, not once per loop")
    func registryChangesOnEveryLoopCountedOnce() throws {
        let store = try LoopedStore(loops: 2, ["--metrics", "127.0.0.1:0"])
        // Taken in turn: the two gateway connections are served on different loops.
        let gateways = try (0..<2).map { _ in try store.gateway() }
        var held: [UInt32] = []
        for gateway in gateways {
            let loaded = try #require(registryReply(try gateway.request(.registry(RegistryRequest()))))
            held.append(try gateway.send(.registry(RegistryRequest(cursor: loaded.cursor, waitMs: 30_000))))
        }
        let port = try #require(store.service.announcedMetricsPort)
        // Both held before the change: a REGISTRY read after it would be answered at once,
        // before the poll that counts the change has run on its loop.
        #expect(try waitUntil {
            try MetricsExposition(parsing: try HTTPGet.metrics(port: port)).value("securepush_store_registry_held_requests") == 2
        })
        _ = try store.deployment.enroll("phone", user: "alice")
        for (gateway, correlation) in zip(gateways, held) {
            let changed = try #require(registryReply(try gateway.reply(to: correlation, timeoutMs: 10_000)))
            #expect(changed.entries.map(\.state) == [.enrolled])
        }
        // Each loop counts and logs (or not) in the poll that noticed the change, before it
        // answers its held REGISTRY: with both answered, both loops are past that point.
        let metrics = try MetricsExposition(parsing: try HTTPGet.metrics(port: port))
        #expect(metrics.value("securepush_store_registry_changes_total", ["state": "enrolled"]) == 1)
        let logged = store.service.standardErrorText().components(separatedBy: "registry changed").count - 1
        #expect(logged == 1, "\(store.service.standardErrorText())")
    }

    @Test("[8-5] failed LOGINs count once per process: on fresh connections, whichever loop takes them, the fourth is RATE_LIMITED")
    func loginLimitsAreSharedByTheLoops() throws {
        let store = try LoopedStore(loops: 4)
        try store.deployment.enrolledRegistration("phone", user: "alice")
        var statuses: [Status?] = []
        for _ in 0..<7 {
            let device = try store.device()
            let reply = try device.request(.login(Login(user: "alice", password: Array("wrong".utf8), deviceID: "phone")))
            statuses.append(errorStatus(reply))
        }
        #expect(statuses.prefix(3).allSatisfy { $0 == .badCredentials }, "\(statuses)")
        #expect(statuses.dropFirst(3).allSatisfy { $0 == .rateLimited }, "\(statuses)")
    }

    @Test("[7.1-5] a provider credential accepted on one connection is refused on every other, whichever loop serves it")
    func credentialsAreAcceptedOncePerProcess() throws {
        let store = try LoopedStore(loops: 4)
        let credential = store.deployment.providerCredential(for: .store)
        let first = try store.reachable.connect()
        #expect(try first.hello(Hello(role: .provider, credential: credential)).type == .helloOK)
        for _ in 0..<8 {
            let replay = try store.reachable.connect()
            #expect(errorStatus(try replay.hello(Hello(role: .provider, credential: credential))) == .badCredentials)
        }
    }

    @Test("[7.1-5] [5.1-3] a credential is remembered only once checked: refused BUSY at the connection limit, or for its version, it is accepted afterwards; accepted, never again")
    func credentialsRefusedBeforeTheCheckAreNotRemembered() throws {
        let store = try LoopedStore(loops: 2, ["--max-connections", "1"])
        let credential = store.deployment.providerCredential(for: .store)
        var holder: BlockingWireClient? = try store.provider()
        let over = try store.reachable.connect()
        #expect(errorStatus(try over.hello(Hello(role: .provider, credential: credential))) == .busy, "at the connection limit")
        holder = nil
        _ = holder
        let unsupported = try store.reachable.connect()
        #expect(errorStatus(try unsupported.hello(Hello(role: .provider, versionMin: 2, versionMax: 2, credential: credential)))
                == .unsupportedVersion)
        var accepted: BlockingWireClient?
        #expect(try waitUntil {
            // The holder's place is given back once its close is seen.
            let client = try store.reachable.connect()
            let reply = try client.hello(Hello(role: .provider, credential: credential))
            if reply.type == .helloOK { accepted = client }
            return errorStatus(reply) != .busy
        })
        #expect(accepted != nil, "neither refusal remembered the credential")
        accepted = nil
        _ = accepted
        #expect(try waitUntil {
            let again = try store.reachable.connect()
            return errorStatus(try again.hello(Hello(role: .provider, credential: credential))) == .badCredentials
        }, "accepted once, refused from then on")
    }

    @Test("--max-connections counts the peers of every loop together: past it each HELLO is BUSY")
    func connectionCapCoversEveryLoop() throws {
        let store = try LoopedStore(loops: 4, ["--max-connections", "3"])
        let admitted = try (0..<3).map { _ in try store.provider() }
        for _ in 0..<6 {
            let over = try store.reachable.connect()
            #expect(errorStatus(try over.hello(Hello(role: .provider, credential: store.deployment.providerCredential(for: .store)))) == .busy)
        }
        #expect(try admitted.allSatisfy { try $0.request(.ping) == .pong })
    }

    @Test("[5.5-1] SIGTERM with STOREs in flight on every loop: all it accepted are answered, the writer stops last, and every STORE_OK is there after a restart")
    func drainAnswersEveryLoopBeforeTheWriterStops() throws {
        let store = try LoopedStore(loops: 4)
        let providers = try (0..<6).map { _ in try store.provider() }
        var sent: [[UInt32]] = Array(repeating: [], count: providers.count)
        for (index, provider) in providers.enumerated() {
            for round in 0..<40 {
                sent[index].append(try provider.send(.store(StoreRequest(user: "alice", payload: Array("in flight \(index)-\(round)".utf8)))))
            }
        }
        #expect(store.service.terminate() == 0)
        var acknowledged: [PayloadID] = []
        for (index, provider) in providers.enumerated() {
            var answered: Set<UInt32> = []
            var lastAccepted: UInt32?
            while let frame = try? provider.receive(timeoutMs: 2_000) {
                if case .storeOK(let ok) = frame.message {
                    acknowledged.append(ok.id)
                    answered.insert(frame.header.correlation)
                }
                if case .goaway(let goaway) = frame.message { lastAccepted = goaway.lastCorrelation }
            }
            // GOAWAY names the last request the store took on; every one up to it is answered.
            let accepted = sent[index].filter { $0 <= (lastAccepted ?? 0) }
            #expect(lastAccepted != nil, "provider \(index) got no GOAWAY")
            #expect(accepted.allSatisfy(answered.contains), "provider \(index): \(accepted.count) accepted, \(answered.count) answered")
        }
        #expect(!acknowledged.isEmpty)
        try store.restart(loops: 1)
        let token = try store.login("alice")
        let device = try store.device()
        for id in acknowledged {
            #expect(try device.request(.fetch(Fetch(id: id, token: token))).type == .fetchOK)
        }
    }
}
