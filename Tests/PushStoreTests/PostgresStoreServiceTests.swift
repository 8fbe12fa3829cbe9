import Foundation
import PushClient
import PushPostgres
import PushSecurity
import PushStore
import PushStoreLogic
import PushTestSupport
import PushWire
import Testing

/// The store's flows through a real `StoreService` on its loop thread and real sockets,
/// with its database on PostgreSQL.
@Suite("Store service on PostgreSQL", .ownThread, .serialized, .enabled(if: PostgresCluster.testsEnabled))
struct PostgresStoreServiceTests {
    @Test("[4.7-1] [4.8-1] [4.10-1] [4.12-1] STORE, FETCH, ACK, then GONE; each read failure its own status")
    func wholeFlow() async throws {
        try await onOwnThread {
            let database = try PostgresDeployment()
            let store = database.client(try database.startStore())
            let id = try store.store("the launch code is 0000", readLimit: 1)
            let device = try store.device()
            let alice = try store.token("alice")
            let bob = try store.token("bob")
            #expect(errorStatus(try device.request(.fetch(Fetch(id: id, token: bob)))) == .forbidden)
            guard case .fetchOK(let fetched) = try device.request(.fetch(Fetch(id: id, token: alice))) else {
                Issue.record("FETCH failed"); return
            }
            #expect(fetched.payload == Array("the launch code is 0000".utf8))
            #expect(errorStatus(try device.request(.ack(Ack(id: id, token: bob)))) == .forbidden)
            #expect(try device.request(.ack(Ack(id: id, token: alice))) == .ackOK(AckOK(id: id)))
            #expect(try device.request(.ack(Ack(id: id, token: alice))) == .ackOK(AckOK(id: id)), "[4.10-2] idempotent")
            #expect(errorStatus(try device.request(.fetch(Fetch(id: id, token: alice)))) == .gone)
            #expect(errorStatus(try device.request(.fetch(Fetch(id: id, token: nil)))) == .authRequired)
            #expect(errorStatus(try device.request(.fetch(Fetch(id: PayloadID.random(), token: alice)))) == .notFound)
            #expect(errorStatus(try device.request(.ack(Ack(id: PayloadID.random(), token: alice)))) == .notFound)
            var forged = alice
            forged[3] ^= 0x20
            #expect(errorStatus(try device.request(.fetch(Fetch(id: id, token: forged)))) == .badToken)
            #expect(errorStatus(try store.device().request(.login(Login(user: "alice", password: Array("nope".utf8), deviceID: "phone"))))
                    == .badCredentials)
            #expect(errorStatus(try store.device().request(.login(Login(user: "alice", password: Array("alice-pw".utf8), deviceID: "unknown"))))
                    == .badCredentials, "[4.6-4]")
            let provider = try store.provider()
            #expect(errorStatus(try provider.request(.store(StoreRequest(user: "carol", payload: [1])))) == .unknownUser)
            #expect(errorStatus(try provider.request(.store(StoreRequest(user: "alice", payload: Array(repeating: 1, count: 4097))))) == .tooLarge)
            guard case .statusOK(let status) = try provider.request(.status(StatusRequest(id: id))) else { Issue.record("STATUS"); return }
            #expect(status.state == .gone && status.fetchCount == 1)
            #expect(errorStatus(try provider.request(.status(StatusRequest(id: PayloadID.random())))) == .notFound)
            let row = try database.sql("SELECT body IS NULL, key_id IS NULL, life, read_count FROM payloads WHERE id = $1", [.bytes(id.bytes)])
            #expect(row.rows == [[.bool(true), .bool(true), .int32(3), .int64(1)]], "the read-out body is erased")
        }
    }

    @Test("[4.9-1] [4.9-3] SYNC pages the unread ids newest first, and an ACK takes one off for that device only")
    func sync() async throws {
        try await onOwnThread {
            let database = try PostgresDeployment()
            let store = database.client(try database.startStore())
            let provider = try store.provider()
            var ids: [PayloadID] = []
            for index in 0..<5 { ids.append(try store.store("m\(index)", via: provider)) }
            _ = try store.store("for bob", for: "bob", via: provider)
            let phone = try store.token("alice", device: "phone")
            let tablet = try store.token("alice", device: "tablet")
            let device = try store.device()
            #expect(try device.request(.ack(Ack(id: ids[1], token: phone))).type == .ackOK)
            var seen: [PayloadID] = []
            var cursor: UInt64 = 0
            for round in 0..<3 {
                guard case .syncOK(let page) = try device.request(.sync(Sync(token: phone, cursor: cursor, limit: 2))) else {
                    Issue.record("SYNC"); return
                }
                seen += page.ids
                cursor = page.cursor
                #expect(page.hasMore == (round == 0), "round \(round)")
                if !page.hasMore { break }
            }
            #expect(seen == [ids[4], ids[3], ids[2], ids[0]])
            guard case .syncOK(let all) = try device.request(.sync(Sync(token: tablet, limit: 0))) else { Issue.record("SYNC"); return }
            #expect(all.ids == [ids[4]] && all.hasMore && all.olderCount == 4, "[4.9-3] a limit of 0 is 1")
            guard case .syncOK(let past) = try device.request(.sync(Sync(token: tablet, cursor: .max))) else { Issue.record("SYNC"); return }
            #expect(past.ids == Array(ids.reversed()) && !past.hasMore, "a cursor above every seq lists them all")
        }
    }

    @Test("[4.11-1] [4.11-2] RECALL makes a payload gone at once and erases it; again it succeeds; unknown is NOT_FOUND")
    func recall() async throws {
        try await onOwnThread {
            let database = try PostgresDeployment()
            let store = database.client(try database.startStore())
            let provider = try store.provider()
            let id = try store.store("recall me", via: provider)
            let token = try store.token()
            #expect(try store.device().request(.fetch(Fetch(id: id, token: token))).type == .fetchOK)
            #expect(try provider.request(.recall(Recall(id: id))) == .recallOK(RecallOK(id: id)))
            #expect(try provider.request(.recall(Recall(id: id))) == .recallOK(RecallOK(id: id)))
            #expect(errorStatus(try provider.request(.recall(Recall(id: PayloadID.random())))) == .notFound)
            #expect(errorStatus(try store.device().request(.fetch(Fetch(id: id, token: token)))) == .gone)
            guard case .syncOK(let page) = try store.device().request(.sync(Sync(token: token))) else { Issue.record("SYNC"); return }
            #expect(page.ids.isEmpty)
            #expect(try database.sql("SELECT body IS NULL FROM payloads").rows == [[.bool(true)]])
        }
    }

    @Test("[4.10-1] a read limit of 2 takes two devices; the same device twice counts once")
    func readLimit() async throws {
        try await onOwnThread {
            let database = try PostgresDeployment()
            let store = database.client(try database.startStore())
            let id = try store.store("twice", readLimit: 2)
            let device = try store.device()
            let phone = try store.token("alice", device: "phone")
            let tablet = try store.token("alice", device: "tablet")
            #expect(try device.request(.ack(Ack(id: id, token: phone))).type == .ackOK)
            #expect(try device.request(.ack(Ack(id: id, token: phone))).type == .ackOK)
            #expect(try device.request(.fetch(Fetch(id: id, token: tablet))).type == .fetchOK)
            #expect(try device.request(.ack(Ack(id: id, token: tablet))).type == .ackOK)
            #expect(errorStatus(try device.request(.fetch(Fetch(id: id, token: tablet)))) == .gone)
        }
    }

    @Test("[7.3-3] [8-14] a user removed, or a device revoked, by the commands is seen by the running store on the next request")
    func removalAndRevocation() async throws {
        try await onOwnThread {
            let database = try PostgresDeployment()
            let store = database.client(try database.startStore())
            let provider = try store.provider()
            let id = try store.store("before", via: provider)
            let device = try store.device()
            let phone = try store.token("alice", device: "phone")
            let tablet = try store.token("alice", device: "tablet")
            #expect(try device.request(.fetch(Fetch(id: id, token: phone))).type == .fetchOK)
            _ = try database.admin.revoke(deviceID: "phone", nowMs: PostgresDeployment.nowMs)
            #expect(errorStatus(try device.request(.fetch(Fetch(id: id, token: phone)))) == .badToken)
            #expect(try device.request(.fetch(Fetch(id: id, token: tablet))).type == .fetchOK)
            _ = try database.admin.remove("alice") { PostgresDeployment.nowMs }
            #expect(errorStatus(try device.request(.fetch(Fetch(id: id, token: tablet)))) == .badToken)
            #expect(errorStatus(try provider.request(.store(StoreRequest(user: "alice", payload: [1])))) == .unknownUser)
            try database.addUser("alice", password: "alice-pw")
            // The store knew alice's old identity: the STORE is bound to the new one.
            let again = try store.store("after", via: provider)
            let fresh = try store.token("alice", device: "phone")
            #expect(errorStatus(try device.request(.fetch(Fetch(id: id, token: fresh)))) == .notFound)
            #expect(try device.request(.fetch(Fetch(id: again, token: fresh))).type == .fetchOK)
        }
    }

    @Test("[4.16-1] [4.16-3] [4.16-8] REGISTRY pages by change number, and a held REGISTRY is answered when a command enrolls a device")
    func registry() async throws {
        try await onOwnThread {
            let database = try PostgresDeployment()
            for index in 0..<5 { try database.enroll("device-\(index)") }
            let store = database.client(try database.startStore())
            let gateway = try store.gateway()
            guard case .registryOK(let first) = try gateway.request(.registry(RegistryRequest(cursor: 0, limit: 3))) else {
                Issue.record("REGISTRY"); return
            }
            #expect(first.entries.count == 3 && first.hasMore && first.cursor == 3)
            guard case .registryOK(let rest) = try gateway.request(.registry(RegistryRequest(cursor: first.cursor))) else {
                Issue.record("REGISTRY"); return
            }
            #expect(rest.entries.count == 2 && !rest.hasMore && rest.cursor == 5)
            let held = try gateway.send(.registry(RegistryRequest(cursor: rest.cursor, waitMs: 10_000)))
            #expect(waitUntil { store.service.onLoop { $0.metrics.text.contains("securepush_store_registry_held_requests 1") } ?? false },
                    "the REGISTRY is held before the enrolment")
            try database.enroll("device-0")
            let started = Date()
            let reply = try gateway.reply(to: held)
            guard case .registryOK(let changes) = reply else { Issue.record("held REGISTRY: \(reply)"); return }
            #expect(changes.entries.map(\.state) == [.revoked, .enrolled] && changes.cursor == 7)
            #expect(Date().timeIntervalSince(started) < 2, "[4.16-8] within a second of the change")
        }
    }

    @Test("[4.7-1] a pipelined burst of STOREs is committed in groups, each acknowledged after its COMMIT")
    func groupCommit() async throws {
        try await onOwnThread {
            let database = try PostgresDeployment()
            let store = database.client(try database.startStore())
            let provider = try store.provider()
            var sent = Set<UInt32>()
            for index in 0..<500 {
                sent.insert(try provider.send(.store(StoreRequest(user: index % 2 == 0 ? "alice" : "bob", payload: Array("n\(index)".utf8)))))
            }
            var received = Set<UInt32>()
            for _ in sent {
                let reply = try provider.receive()
                #expect(reply.message.type == .storeOK)
                received.insert(reply.header.correlation)
            }
            #expect(received == sent)
            #expect(try database.sql("SELECT count(*) FROM payloads").int64(0, 0) == 500)
            let transactions = try database.sql("SELECT count(DISTINCT xmin::text) FROM payloads").int64(0, 0)
            #expect(transactions < 250, "\(transactions) transactions for 500 STOREs")
        }
    }

    @Test("[4.1-1] a STORE whose statement fails takes only itself down: the rest of its group commits and is acknowledged")
    func failureStaysWithItsOperation() async throws {
        try await onOwnThread {
            let database = try PostgresDeployment()
            // The database refuses two read limits, one as if the recipient had just been removed.
            _ = try database.sql("""
                CREATE FUNCTION refuse_for_test() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
                    IF NEW.read_limit = 4242 THEN RAISE EXCEPTION 'refused for the test'; END IF;
                    IF NEW.read_limit = 4343 THEN RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation'; END IF;
                    RETURN NEW;
                END $$
                """)
            _ = try database.sql("CREATE TRIGGER refuse BEFORE INSERT ON payloads FOR EACH ROW EXECUTE FUNCTION refuse_for_test()")
            let store = database.client(try database.startStore())
            let provider = try store.provider()
            let limits: [UInt32] = (0..<30).map { $0 == 7 ? 4343 : $0 % 10 == 3 ? 4242 : 0 }
            let sent = try limits.map { try provider.send(.store(StoreRequest(user: "alice", payload: [1], readLimit: $0))) }
            var replies: [UInt32: Message] = [:]
            for _ in sent {
                let frame = try provider.receive()
                replies[frame.header.correlation] = frame.message
            }
            for (index, correlation) in sent.enumerated() {
                let reply = replies[correlation]
                switch limits[index] {
                case 4242: #expect(reply.flatMap(errorStatus) == .internalError, "\(index)")
                case 4343: #expect(reply.flatMap(errorStatus) == .unknownUser, "\(index)")
                default: #expect(reply?.type == .storeOK, "\(index)")
                }
            }
            #expect(try database.sql("SELECT count(*) FROM payloads").int64(0, 0) == 26)
            #expect(store.service.onLoop { $0.readiness() } == .ready, "one operation's failure is not the database's")
        }
    }

    @Test("[5.5-1] [4.7-1] a drain answers every STORE it accepted, after its COMMIT, then closes")
    func drain() async throws {
        try await onOwnThread {
            let database = try PostgresDeployment()
            let store = database.client(try database.startStore())
            let provider = try store.provider()
            let sent = try (0..<200).map { try provider.send(.store(StoreRequest(user: "alice", payload: Array("drain \($0)".utf8)))) }
            // Answered before the drain starts, so every STORE before it was accepted by then.
            #expect(try provider.request(.ping) == .pong)
            store.service.stop()
            var acked: [PayloadID] = []
            var sawGoaway = false
            while let frame = try? provider.receive(timeoutMs: 5_000) {
                switch frame.message {
                case .storeOK(let ok): acked.append(ok.id)
                case .goaway(let goaway): sawGoaway = goaway.status == .shuttingDown && goaway.lastCorrelation >= sent.last ?? 0
                default: Issue.record("unexpected \(frame.message)")
                }
            }
            #expect(sawGoaway && acked.count == sent.count)
            #expect(try database.sql("SELECT count(*) FROM payloads").int64(0, 0) == Int64(sent.count))
        }
    }

    @Test("[4.7-4] expired payloads are swept: GONE, their bodies erased")
    func sweep() async throws {
        try await onOwnThread {
            let database = try PostgresDeployment()
            let clock = ManualClock()
            let store = database.client(try database.startStore(clock: clock) { $0.settings.sweepIntervalMs = 100 })
            let id = try store.store("short", ttl: 1)
            let keep = try store.store("long", ttl: 3600)
            clock.advance(byMs: 1_500)
            #expect(errorStatus(try store.device().request(.fetch(Fetch(id: id, token: try store.token())))) == .gone)
            #expect(waitUntil(timeoutSeconds: 5) {
                (try? database.sql("SELECT life FROM payloads WHERE id = $1 AND body IS NULL", [.bytes(id.bytes)]).rows) == [[.int32(4)]]
            })
            #expect(try database.sql("SELECT life FROM payloads WHERE id = $1 AND body IS NOT NULL", [.bytes(keep.bytes)]).rows == [[.int32(1)]])
        }
    }

    /// What to forget is the rules' decision (`LoginLimitState.pairIdle`,
    /// `LoginLimitState.budgetRefilled`, `FailureWindow`), made in Swift; the database
    /// only deletes the rows it is told of, or that lie before a bound time.
    @Test("[8-9] [8-10] [8-11] the sweep forgets login limits and refused-token windows that hold no one back, and keeps the rest")
    func sweepForgetsLimits() async throws {
        try await onOwnThread {
            let database = try PostgresDeployment()
            let clock = ManualClock()
            let settings = StoreSettings()
            let now = clock.wallMilliseconds(), hour: UInt64 = 3_600_000
            let full = Int64(settings.loginFailuresPerAddress) * Int64(settings.loginFailureRefillMs)
            for (address, credit, updated) in [("10.0.0.1", full - 3_000, now - 3_000), ("10.0.0.2", -1_000_000, now - 3_000),
                                               ("10.0.0.3", full, now + hour)] {
                _ = try database.sql("INSERT INTO login_budgets (address, credit_ms, updated_ms) VALUES ($1, $2, $3)",
                                     [.text(address), .int64(credit), .int64(Int64(updated))])
            }
            for (user, failures, blocked, last, trusted) in [("idle", 2, 0, now - hour - 1, 0), ("recent", 2, 0, now - 1_000, 0),
                                                             ("trusted", 0, 0, 0, now + hour), ("held", 9, now + hour, now - 2 * hour, 0)] {
                _ = try database.sql("""
                    INSERT INTO login_pairs (user_name, address, failures, blocked_until, last_attempt, trusted_until)
                    VALUES ($1, '10.0.0.1', $2, $3, $4, $5)
                    """, [.text(user), .int64(Int64(failures)), .int64(Int64(blocked)), .int64(Int64(last)), .int64(Int64(trusted))])
            }
            for (address, start) in [("10.0.0.8", now), ("10.0.0.9", now - settings.badTokenWindowMs - 1)] {
                _ = try database.sql("INSERT INTO token_failures (address, window_start, failures) VALUES ($1, $2, 3)",
                                     [.text(address), .int64(Int64(start))])
            }
            let store = try database.startStore(clock: clock) { $0.settings.sweepIntervalMs = 100 }
            defer { store.stop() }
            func column(_ sql: String) -> [String] {
                ((try? database.sql(sql).rows) ?? []).compactMap { if case .text(let text) = $0.first { text } else { nil } }
            }
            #expect(waitUntil(timeoutSeconds: 5) {
                column("SELECT address FROM login_budgets ORDER BY address") == ["10.0.0.2", "10.0.0.3"]
            }, "[8-11] a refilled budget is forgotten; one in debt, or changed later than now, is kept")
            #expect(waitUntil(timeoutSeconds: 5) {
                column("SELECT user_name FROM login_pairs ORDER BY user_name") == ["held", "recent", "trusted"]
            }, "[8-10] a pair idle for an hour is forgotten; one held back, recent or trusted is kept")
            #expect(waitUntil(timeoutSeconds: 5) { column("SELECT address FROM token_failures") == ["10.0.0.8"] },
                    "[8-9] an ended window is forgotten")
        }
    }

    @Test("the log names the database without its password and carries no payloads, passwords or tokens")
    func logsAreClean() async throws {
        try await onOwnThread {
            let plain = try PostgresCluster.shared().createDatabase()
            // Trust authentication: the server never asks for the password, but the URL has one.
            let url = plain.replacingOccurrences(of: "://postgres@", with: "://postgres:SECRETPW@")
            let database = try PostgresDeployment(url: url)
            let log = CapturedLog()
            let store = database.client(try database.startStore { $0.logger = log.logger(label: "securepush.store") })
            let id = try store.store("TOPSECRETPAYLOAD")
            let token = try store.token()
            _ = try store.device().request(.fetch(Fetch(id: id, token: token)))
            _ = try store.device().request(.login(Login(user: "alice", password: Array("wrong-pw".utf8), deviceID: "phone")))
            store.service.stop()
            let logs = log.text
            #expect(logs.contains("store ready") && logs.contains("postgresql"))
            #expect(!logs.contains("SECRETPW"))
            #expect(!logs.contains("TOPSECRETPAYLOAD"))
            #expect(!logs.contains("alice-pw") && !logs.contains("wrong-pw"))
            #expect(!logs.contains(token.hexString))
            #expect(try database.sql("SELECT count(*) FROM payloads WHERE position('TOPSECRET'::bytea IN body) > 0").int64(0, 0) == 0,
                    "bodies are sealed at rest")
        }
    }
}
