import Foundation
import Testing
import PushClient
import PushTestSupport
import PushWire

/// IDs the store acknowledged, collected from several sender threads.
final class AcknowledgedLedger: @unchecked Sendable {
    private let lock = NSLock()
    private var entries: [(PayloadID, [UInt8])] = []

    func record(_ id: PayloadID, _ payload: [UInt8]) {
        lock.lock()
        entries.append((id, payload))
        lock.unlock()
    }

    var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return entries.count
    }

    var all: [(PayloadID, [UInt8])] {
        lock.lock()
        defer { lock.unlock() }
        return entries
    }
}

@Suite("Durability under SIGKILL", .ownThread, .serialized)
struct DurabilityTests {
    /// Sends pipelined STOREs until the connection dies, recording each STORE_OK.
    static func sendUntilKilled(port: Int, credential: [UInt8], sender: Int, ledger: AcknowledgedLedger) {
        guard let client = try? BlockingWireClient(host: "127.0.0.1", port: port, timeoutMs: 3_000),
              case .helloOK? = try? client.hello(Hello(role: .provider, credential: credential)) else { return }
        var inFlight: [UInt32: [UInt8]] = [:]
        var sequence = 0
        while sequence < 200_000 {
            while inFlight.count < 32 {
                let payload = Array("sender \(sender) message \(sequence)".utf8)
                sequence += 1
                guard let id = try? client.send(.store(StoreRequest(user: "alice", payload: payload))) else { return }
                inFlight[id] = payload
            }
            guard let reply = try? client.receive(timeoutMs: 3_000) else { return }
            guard case .storeOK(let ok) = reply.message, let payload = inFlight.removeValue(forKey: reply.header.correlation) else { return }
            ledger.record(ok.id, payload)
        }
    }

    @Test("[4.7-1] every acknowledged STORE survives a SIGKILL at a random moment", arguments: [100, 1_000, 5_000])
    func killDuringStores(acknowledgedBeforeKill: Int) throws {
        let store = try StoreProcess()
        let ledger = AcknowledgedLedger()
        let group = DispatchGroup()
        let port = store.service.port
        for sender in 0..<4 {
            let credential = store.deployment.providerCredential(for: .store)
            group.enter()
            Thread.detachNewThread {
                Self.sendUntilKilled(port: port, credential: credential, sender: sender, ledger: ledger)
                group.leave()
            }
        }
        // A random moment while STOREs are being acknowledged: some count past the chosen one.
        let target = acknowledgedBeforeKill + Int.random(in: 0...(acknowledgedBeforeKill / 2))
        #expect(waitUntil(timeoutSeconds: 30) { ledger.count >= target }, "the store acknowledged \(ledger.count) STOREs")
        store.service.killHard()
        #expect(group.wait(timeout: .now() + 30) == .success)

        let acknowledged = ledger.all
        #expect(acknowledged.count > 0, "the store acknowledged something before the kill")
        try store.restart()
        let token = try store.login("alice")
        let reader = try store.device()
        var lost: [PayloadID] = []
        // Pipelined in batches: the check itself must not take long.
        for batch in stride(from: 0, to: acknowledged.count, by: 256) {
            let slice = acknowledged[batch..<min(batch + 256, acknowledged.count)]
            var expected: [UInt32: (PayloadID, [UInt8])] = [:]
            for (id, payload) in slice {
                expected[try reader.send(.fetch(Fetch(id: id, token: token)))] = (id, payload)
            }
            for _ in slice {
                let reply = try reader.receive()
                guard let (id, payload) = expected[reply.header.correlation] else { continue }
                if case .fetchOK(let ok) = reply.message, ok.payload == payload { continue }
                lost.append(id)
            }
        }
        #expect(lost.count == 0, "\(lost.count) of \(acknowledged.count) acknowledged payloads lost, e.g. \(lost.prefix(3))")
    }
}
