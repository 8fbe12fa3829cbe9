import Foundation
import PushClient
import PushPostgres
import PushService
import PushStore
import PushTestSupport
import PushWire
import Synchronization
import Testing

/// Faults of the database itself, on a PostgreSQL server of the test's own.
@Suite("Store on PostgreSQL: database faults", .ownThread, .enabled(if: PostgresCluster.testsEnabled))
struct PostgresDurabilityTests {
    /// Pipelined STOREs on one connection until `stop` is set; the IDs acknowledged with
    /// STORE_OK, and how many requests got an error instead (also counted in `errors` as
    /// they come).
    private static func storeUntilStopped(_ store: PostgresStoreClient, user: String, stop: StopFlag, errors: ErrorCount,
                                          window: Int = 16)
        throws -> (acked: [PayloadID], failed: Int) {
        let provider = try store.provider()
        var acked: [PayloadID] = []
        var failed = 0
        var outstanding = 0
        var sent = 0
        while !stop.isSet || outstanding > 0 {
            while !stop.isSet && outstanding < window {
                _ = try provider.send(.store(StoreRequest(user: user, payload: Array("durable \(user) \(sent)".utf8))))
                sent += 1
                outstanding += 1
            }
            guard let frame = try? provider.receive(timeoutMs: 10_000) else { break }
            outstanding -= 1
            switch frame.message {
            case .storeOK(let ok): acked.append(ok.id)
            case .error:
                failed += 1
                errors.add()
            default: Issue.record("unexpected reply \(frame.message)")
            }
        }
        return (acked, failed)
    }

    @Test("[4.7-1] SIGKILL of the PostgreSQL server under load, then a restart: every acknowledged STORE is there, and the store recovers")
    func serverKilledUnderLoad() async throws {
        let cluster = try await onOwnThread { try PostgresCluster.start() }
        defer { cluster.stop() }
        let database = try await onOwnThread { try PostgresDeployment(url: try cluster.createDatabase()) }
        let store = try await onOwnThread { database.client(try database.startStore()) }
        let stop = StopFlag()
        let errors = ErrorCount()
        async let load = concurrently(4) { index in
            let result = try PostgresDurabilityTests.storeUntilStopped(store, user: index % 2 == 0 ? "alice" : "bob", stop: stop, errors: errors)
            return result
        }
        // Enough load to have groups in flight when the server dies. Generous: the whole
        // suite, cluster tests and their processes included, shares two cores with it.
        let loaded = try await onOwnThread {
            waitUntil(timeoutSeconds: 60) {
                (try? database.sql("SELECT count(*) FROM payloads").int64(0, 0)) ?? 0 >= 400
            }
        }
        #expect(loaded)
        cluster.kill()
        let unready = try await onOwnThread {
            waitUntil(timeoutSeconds: 10) {
                if case .notReady = store.service.onLoop({ $0.readiness() }) ?? .ready { return true }
                return false
            }
        }
        #expect(unready, "readiness says not ready while the database is gone")
        // Requests made while the server is down are answered with errors, not left hanging.
        let refused = try await onOwnThread { waitUntil(timeoutSeconds: 30) { errors.count > 0 } }
        #expect(refused, "no request failed while the database was down")
        stop.set()
        let results = try await load
        try await onOwnThread { try cluster.restart() }
        let ready = try await onOwnThread {
            waitUntil(timeoutSeconds: 20) { store.service.onLoop({ $0.readiness() }) == .ready }
        }
        #expect(ready, "the store reconnects once the server is back")

        let acked = results.flatMap(\.acked)
        let failed = results.reduce(0) { $0 + $1.failed }
        #expect(acked.count >= 400)
        #expect(failed > 0, "requests made while the server was down failed rather than hanging")
        let stored = try await onOwnThread { () -> Set<PayloadID> in
            let rows = try database.sql("SELECT id FROM payloads")
            return Set(try rows.rows.indices.map { try rows.payloadIDForTest($0) })
        }
        let missing = acked.filter { !stored.contains($0) }
        #expect(missing.isEmpty, "\(missing.count) of \(acked.count) acknowledged STOREs lost")
        try await onOwnThread {
            try database.reopenAdministration()
            let token = try store.token()
            let device = try store.device()
            for id in acked.prefix(20) { #expect(try device.request(.fetch(Fetch(id: id, token: token))).type == .fetchOK) }
            #expect(try store.provider().request(.store(StoreRequest(user: "alice", payload: [1]))).type == .storeOK)
        }
        store.service.stop()
    }
}

/// A flag one thread sets and others poll.
/// Errors a load has had so far, for the test to wait on.
final class ErrorCount: Sendable {
    private let value = Atomic<Int>(0)
    var count: Int { value.load(ordering: .acquiring) }
    func add() { value.add(1, ordering: .releasing) }
}

final class StopFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set() { value.store(true, ordering: .releasing) }
}

extension PostgresResult {
    func payloadIDForTest(_ row: Int) throws -> PayloadID {
        guard let id = PayloadID(bytes: try bytes(row, 0)) else { throw ServiceError.failed("not an id") }
        return id
    }
}
