import Foundation
import PushEventLoop
import PushPostgres
@testable import PushStore
@testable import PushStoreLogic
@testable import PushStorePostgres
import PushTestSupport
import PushWire
import Testing

/// FETCH, ACK, STATUS and RECALL's reads coalesced into one statement per batch
/// (`PostgresReadBatch`), against a real database: each request gets its own row back.
@Suite("Coalesced reads on PostgreSQL", .ownThread, .serialized, .enabled(if: PostgresCluster.testsEnabled))
struct PostgresReadBatchTests {
    /// Alice's payloads (bodies are their ids, "sealed" by reversing), a revoked and an
    /// enrolled device, and a loop with a connection to read on.
    final class Fixture {
        let database: PostgresDeployment
        let loop: EventLoop
        let connection: PostgresConnection
        let alice: UInt64
        var ids: [PayloadID] = []

        init(payloads: Int) throws {
            database = try PostgresDeployment()
            alice = try database.sql("SELECT id FROM users WHERE name = 'alice'").uint(0, 0)
            try database.enroll("phone", user: "alice")
            for index in 0..<payloads {
                let id = PayloadID.random()
                ids.append(id)
                _ = try database.sql("""
                    INSERT INTO payloads (id, user_id, key_id, body, created_at, expires_at, read_limit, read_count)
                    VALUES ($1, $2, 1, $3, 10, 20, 3, $4)
                    """, [.bytes(id.bytes), .uint(alice), .bytes(id.bytes.reversed()), .int(index % 3)])
            }
            loop = try EventLoop()
            var connected: Result<PostgresConnection, PostgresError>?
            PostgresConnection.connect(database.url, on: loop) { connected = $0 }
            guard loop.run(until: { connected != nil }, timeoutSeconds: 15), let connection = try connected?.get() else {
                throw ServiceError.failed("no connection")
            }
            self.connection = connection
        }

        deinit {
            connection.close()
            loop.shutdown()
        }

        /// Opens by reversing; the id `poisoned` does not open.
        func batch(poisoned: PayloadID? = nil, send: PostgresReadBatch.Send? = nil) -> PostgresReadBatch {
            PostgresReadBatch(loop: loop, open: { sealed, keyID, id, _ in
                if id == poisoned { throw StoreBackendError("does not open") }
                #expect(keyID == 1)
                return sealed.reversed()
            }, send: send ?? { [connection] statement, done in connection.query(statement, completion: done) })
        }

        /// Makes every read at once, in one turn of the loop, and waits for all answers.
        func readAll(_ batch: PostgresReadBatch, _ reads: [StoreReads]) throws -> [Result<StoreReadResult, StoreBackendError>] {
            var answers = [Result<StoreReadResult, StoreBackendError>?](repeating: nil, count: reads.count)
            var remaining = reads.count
            loop.schedule(after: .zero) {
                for (index, read) in reads.enumerated() {
                    batch.read(read) { result in
                        #expect(answers[index] == nil, "answered twice")
                        answers[index] = result
                        remaining -= 1
                    }
                }
            }
            guard loop.run(until: { remaining == 0 }, timeoutSeconds: 15) else { throw ServiceError.failed("reads not answered") }
            return answers.compactMap { $0 }
        }
    }

    @Test("600 reads of one turn go as three statements; FETCH, ACK, STATUS and RECALL shapes each get their own row")
    func manyInOneBatch() async throws {
        try await onOwnThread {
            let fixture = try Fixture(payloads: 50)
            let batch = fixture.batch()
            var reads: [StoreReads] = []
            var expected: [(payload: PayloadID?, body: Bool, user: Bool, device: Bool)] = []
            for index in 0..<600 {
                let known = index % 5 != 4
                let id = known ? fixture.ids[index % fixture.ids.count] : PayloadID.random()
                switch index % 4 {
                case 0:  // FETCH: alice's phone
                    reads.append(StoreReads(user: "alice", device: "phone", payload: id, body: true))
                    expected.append((known ? id : nil, true, true, true))
                case 1:  // ACK of another user, with a device that is not enrolled
                    reads.append(StoreReads(user: index % 8 == 1 ? "bob" : "nobody", device: "tablet", payload: id))
                    expected.append((known ? id : nil, false, index % 8 == 1, false))
                default:  // STATUS, RECALL
                    reads.append(StoreReads(payload: id))
                    expected.append((known ? id : nil, false, false, false))
                }
            }
            let answers = try fixture.readAll(batch, reads)
            #expect(batch.batchesSent == 3 && batch.requestsSent == 600, "\(batch.batchesSent) statements")
            for (index, answer) in answers.enumerated() {
                guard case .success(let found) = answer else {
                    Issue.record("read \(index) failed: \(answer)")
                    continue
                }
                let want = expected[index]
                #expect(found.payload?.id == want.payload, "\(index)")
                if let payload = found.payload {
                    #expect(payload.userID == fixture.alice)
                    #expect(payload.body == (want.body ? payload.id.bytes : []), "\(index): the body only when asked")
                    #expect(payload.readLimit == 3 && payload.expiresAt == 20 && payload.life == .live)
                    let position = fixture.ids.firstIndex(of: payload.id) ?? 0
                    #expect(payload.readCount == UInt32(position % 3), "\(index): its own row")
                }
                #expect((found.user != nil) == want.user, "\(index)")
                if want.user { #expect(found.user?.name == reads[index].user && found.user?.passwordHash == "") }
                #expect((found.device != nil) == want.device, "\(index)")
                if want.device { #expect(found.device?.userID == fixture.alice) }
                #expect(found.unread == nil && found.loginLimits == nil && found.registry == nil)
            }
        }
    }

    @Test("a batch that fails fails only its own requests; a body that does not open fails only its request")
    func failuresStayWithTheirRequests() async throws {
        try await onOwnThread {
            let fixture = try Fixture(payloads: 4)
            var sent = 0
            // The second statement fails at the server, as it runs (division by zero).
            let batch = fixture.batch(poisoned: fixture.ids[3]) { [connection = fixture.connection] statement, done in
                sent += 1
                var statement = statement
                if sent == 2 { statement.sql += " WHERE r.n / 0 = 1" }
                connection.query(statement, completion: done)
            }
            let reads = (0..<600).map { StoreReads(user: "alice", device: "phone", payload: fixture.ids[$0 % 4], body: true) }
            let answers = try fixture.readAll(batch, reads)
            #expect(sent == 3)
            for (index, answer) in answers.enumerated() {
                let inSecond = index >= PostgresReadBatch.maxBatch && index < 2 * PostgresReadBatch.maxBatch
                switch answer {
                case .success(let found):
                    #expect(!inSecond && index % 4 != 3, "\(index) should have failed")
                    #expect(found.payload?.body == fixture.ids[index % 4].bytes)
                case .failure:
                    #expect(inSecond || index % 4 == 3, "\(index) should not have failed")
                }
            }
            // The connection carries on: the next batch is read.
            let after = try fixture.readAll(batch, [StoreReads(payload: fixture.ids[0])])
            #expect((try? after[0].get())?.payload?.id == fixture.ids[0])
        }
    }

    @Test("[4.8-1] [4.10-1] [4.12-1] FETCHes, ACKs and STATUSes pipelined at a store: found, not found and forbidden, each answered as if alone")
    func pipelinedThroughTheStore() async throws {
        try await onOwnThread {
            let database = try PostgresDeployment()
            let store = database.client(try database.startStore())
            let provider = try store.provider()
            var ids: [PayloadID] = []
            for index in 0..<10 { ids.append(try store.store("m\(index)", via: provider)) }
            let bobs = try store.store("for bob", for: "bob", via: provider)
            let alice = try store.token("alice")
            let device = try store.device()
            // Replies expected by each client's correlations: type, error status, body.
            var byDevice: [UInt32: (MessageType, Status?, String)] = [:]
            var byProvider: [UInt32: (MessageType, Status?, String)] = [:]
            for round in 0..<20 {
                for (index, id) in ids.enumerated() {
                    byDevice[try device.send(.fetch(Fetch(id: id, token: alice)))] = (.fetchOK, nil, "m\(index)")
                }
                byDevice[try device.send(.fetch(Fetch(id: bobs, token: alice)))] = (.error, .forbidden, "")
                byDevice[try device.send(.fetch(Fetch(id: PayloadID.random(), token: alice)))] = (.error, .notFound, "")
                byDevice[try device.send(.ack(Ack(id: ids[round % ids.count], token: alice)))] = (.ackOK, nil, "")
                byDevice[try device.send(.ack(Ack(id: bobs, token: alice)))] = (.error, .forbidden, "")
                byProvider[try provider.send(.status(StatusRequest(id: ids[round % ids.count])))] = (.statusOK, nil, "")
                byProvider[try provider.send(.status(StatusRequest(id: PayloadID.random())))] = (.error, .notFound, "")
            }
            var replies = 0
            for (client, expected) in [(device, byDevice), (provider, byProvider)] {
                for _ in 0..<expected.count {
                    let (header, message) = try client.receive(timeoutMs: 15_000)
                    replies += 1
                    guard let want = expected[header.correlation] else {
                        Issue.record("a reply to nothing sent")
                        continue
                    }
                    #expect(message.type == want.0, "\(header.correlation): \(message)")
                    if let status = want.1 { #expect(errorStatus(message) == status) }
                    if case .fetchOK(let fetched) = message { #expect(fetched.payload == Array(want.2.utf8)) }
                }
            }
            #expect(replies == byDevice.count + byProvider.count)
        }
    }
}
