import Foundation
import Testing
import PushClient
import PushSecurity
import PushTestSupport
import PushWire

/// Two store processes over one PostgreSQL database (issue 14.6): one is killed while
/// both are loaded with pipelined STOREs, and the other still serves every payload either
/// of them acknowledged.
@Suite("Two stores on PostgreSQL under SIGKILL", .ownThread, .serialized, .enabled(if: PostgresCluster.testsEnabled))
struct StoreClusterDurabilityTests {
    /// Pipelines STOREs (32 in flight) until the connection dies or `stop` is set,
    /// recording each STORE_OK.
    static func send(port: Int, credential: [UInt8], sender: Int, ledger: AcknowledgedLedger, stop: StopFlag) {
        guard let client = try? BlockingWireClient(host: "127.0.0.1", port: port, timeoutMs: 5_000),
              case .helloOK? = try? client.hello(Hello(role: .provider, credential: credential)) else { return }
        var inFlight: [UInt32: [UInt8]] = [:]
        var sequence = 0
        while sequence < 100_000 {
            while inFlight.count < 32, !stop.isSet {
                let payload = Array("sender \(sender) message \(sequence)".utf8)
                sequence += 1
                guard let id = try? client.send(.store(StoreRequest(user: "alice", payload: payload))) else { return }
                inFlight[id] = payload
            }
            if inFlight.isEmpty { return }
            guard let reply = try? client.receive(timeoutMs: 5_000) else { return }
            guard case .storeOK(let ok) = reply.message, let payload = inFlight.removeValue(forKey: reply.header.correlation) else { return }
            ledger.record(ok.id, payload)
        }
    }

    @Test("[4.7-1] one of two stores is SIGKILLed under load: every STORE either acknowledged is served by the survivor, which kept storing")
    func killOneStoreUnderLoad() throws {
        let url = try PostgresCluster.shared().createDatabase()
        let deployment = try TemporaryDeployment(database: url)
        try deployment.addUser("alice", password: "alice-pw")
        let storeA = try ServiceProcess(["store", "--data-dir", deployment.directory])
        defer { storeA.killHard() }
        let storeB = try ServiceProcess(["store", "--data-dir", deployment.directory])
        defer { _ = storeB.terminate() }

        let ledgerA = AcknowledgedLedger(), ledgerB = AcknowledgedLedger()
        let stop = StopFlag()
        let group = DispatchGroup()
        for (index, (port, ledger)) in [(storeA.port, ledgerA), (storeA.port, ledgerA), (storeB.port, ledgerB), (storeB.port, ledgerB)].enumerated() {
            let credential = deployment.providerCredential(for: .store)
            group.enter()
            Thread.detachNewThread {
                Self.send(port: port, credential: credential, sender: index, ledger: ledger, stop: stop)
                group.leave()
            }
        }
        let target = 500 + Int.random(in: 0...250)
        #expect(waitUntil(timeoutSeconds: 60) { ledgerA.count >= target }, "store A acknowledged \(ledgerA.count)")
        storeA.killHard()
        let atKill = ledgerB.count
        #expect(waitUntil(timeoutSeconds: 60) { ledgerB.count >= atKill + 500 }, "store B went on storing: \(ledgerB.count - atKill) since")
        stop.set()
        #expect(group.wait(timeout: .now() + 30) == .success)

        let acknowledged = ledgerA.all + ledgerB.all
        _ = try deployment.enrolledRegistration("phone")
        let reader = try BlockingWireClient(host: "127.0.0.1", port: storeB.port, timeoutMs: 5_000)
        guard case .helloOK = try reader.hello(Hello(role: .device)) else { Issue.record("no HELLO_OK from store B"); return }
        guard case .loginOK(let login) = try reader.request(.login(Login(user: "alice", password: Array("alice-pw".utf8), deviceID: "phone"))) else {
            Issue.record("LOGIN at store B failed"); return
        }
        let token = login.token
        var lost: [PayloadID] = []
        for batch in stride(from: 0, to: acknowledged.count, by: 256) {
            let slice = acknowledged[batch..<min(batch + 256, acknowledged.count)]
            var expected: [UInt32: (PayloadID, [UInt8])] = [:]
            for (id, payload) in slice { expected[try reader.send(.fetch(Fetch(id: id, token: token)))] = (id, payload) }
            for _ in slice {
                let reply = try reader.receive()
                guard let (id, payload) = expected[reply.header.correlation] else { continue }
                if case .fetchOK(let ok) = reply.message, ok.payload == payload { continue }
                lost.append(id)
            }
        }
        #expect(ledgerA.count > 0 && lost.isEmpty, "\(lost.count) of \(acknowledged.count) acknowledged payloads lost, e.g. \(lost.prefix(3))")
    }
}
