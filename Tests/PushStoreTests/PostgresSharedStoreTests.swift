import Foundation
import PushClient
import PushPostgres
import PushSecurity
import PushStore
import PushTestSupport
import PushWire
import Testing

/// Two stores on one PostgreSQL database, as two processes of a deployment would be: every
/// store serves every payload, and what must be shared (read receipts, recalls, login
/// limits) is decided in the database, so it holds when both serve the same payload or the
/// same guesser at once.
@Suite("Two stores on one PostgreSQL database", .ownThread, .serialized, .enabled(if: PostgresCluster.testsEnabled))
struct PostgresSharedStoreTests {
    /// Two stores on a fresh database with alice and bob.
    private func twoStores(configure: @escaping (inout StoreConfiguration) -> Void = { _ in })
        throws -> (PostgresDeployment, PostgresStoreClient, PostgresStoreClient) {
        let database = try PostgresDeployment()
        return (database, database.client(try database.startStore(configure: configure)),
                database.client(try database.startStore(configure: configure)))
    }

    @Test("[4.7-1] [4.8-3] a STORE at store A is fetched through store B, and A's STATUS counts B's fetch")
    func storeHereFetchThere() async throws {
        try await onOwnThread {
            let (_, a, b) = try twoStores()
            let id = try a.store("from A")
            guard case .fetchOK(let fetched) = try b.device().request(.fetch(Fetch(id: id, token: try b.token()))) else {
                Issue.record("FETCH at B"); return
            }
            #expect(fetched.payload == Array("from A".utf8))
            let provider = try a.provider()
            #expect(waitUntil(timeoutSeconds: 5) {
                guard case .statusOK(let status)? = try? provider.request(.status(StatusRequest(id: id))) else { return false }
                return status.state == .fetched && status.fetchCount == 1
            })
            #expect(try b.provider().request(.recall(Recall(id: id))).type == .recallOK)
            #expect(errorStatus(try a.device().request(.fetch(Fetch(id: id, token: try a.token())))) == .gone)
        }
    }

    @Test("[8-9] forged tokens spread over two stores meet one BAD_TOKEN limit per address: B refuses once A has counted the limit, until the window ends")
    func badTokenLimitShared() async throws {
        try await onOwnThread {
            let (database, a, b) = try twoStores { $0.settings.badTokenWindowMs = 60_000 }
            let forged = Fetch(id: PayloadID.random(), token: Array(repeating: 7, count: 80))
            // The limit is 20 per address in the window: 15 at A, 5 at B.
            for (index, store) in (Array(repeating: a, count: 15) + Array(repeating: b, count: 5)).enumerated() {
                #expect(errorStatus(try store.device().request(.fetch(forged))) == .badToken, "refusal \(index + 1)")
            }
            #expect(waitUntil(timeoutSeconds: 5) {
                (try? database.sql("SELECT failures FROM token_failures WHERE address = '127.0.0.1'").int64(0, 0)) == 20
            }, "both stores counted in the database")
            for store in [a, b] {
                #expect(waitUntil(timeoutSeconds: 5) {
                    (try? errorStatus(store.device().request(.fetch(Fetch(id: PayloadID.random(), token: store.token()))))) == .rateLimited
                }, "even a genuine token is held back at either store")
            }
        }
    }

    @Test("[8-10] [8-13] failed LOGINs of one user spread over two stores are held back as if made at one")
    func pairLimitShared() async throws {
        try await onOwnThread {
            let (database, a, b) = try twoStores()
            try database.enroll("phone")
            let stores = [a, b, a]
            for (index, store) in stores.enumerated() {
                let reply = try store.device().request(.login(Login(user: "alice", password: Array("guess\(index)".utf8), deviceID: "phone")))
                #expect(errorStatus(reply) == .badCredentials)
                // An attempt counts once its outcome is committed, just after the reply.
                #expect(waitUntil(timeoutSeconds: 5) {
                    (try? database.sql("SELECT failures FROM login_pairs WHERE user_name = 'alice'").int64(0, 0)) == Int64(index + 1)
                })
            }
            let held = try b.device().request(.login(Login(user: "alice", password: Array("guess3".utf8), deviceID: "phone")))
            #expect(errorStatus(held) == .rateLimited, "the third failure, made at A, holds the pair back at B")
            let right = try b.device().request(.login(Login(user: "alice", password: Array("alice-pw".utf8), deviceID: "phone")))
            #expect(errorStatus(right) == .rateLimited, "[4.6-3] not checked while held back")
            #expect(try database.sql("SELECT failures FROM login_pairs WHERE user_name = 'alice'").int64(0, 0) == 3,
                    "[8-13] a LOGIN answered RATE_LIMITED counts for nothing")
        }
    }

    /// Each store decides a failure from the pair as it read it; were the decided values
    /// written blindly, failures decided from the same read would overwrite each other and
    /// the pair would never reach its limit. Written by compare-and-set, each counts.
    @Test("[8-10] [8-11] failed LOGINs of one user sent together to two stores all count, and hold the pair back at both")
    func concurrentFailuresAllCount() async throws {
        try await onOwnThread {
            let guesses = 24
            let (database, a, b) = try twoStores {
                $0.settings.loginFreeFailures = guesses
                $0.settings.loginFailuresPerAddress = 1_000
                // A failure costs an hour of refill: what refills during the test is lost in it.
                $0.settings.loginFailureRefillMs = 3_600_000
                $0.settings.loginBackoffMs = 600_000
                $0.settings.loginMaxBackoffMs = 600_000
            }
            try database.enroll("phone")
            let devices = [try a.device(), try b.device()]
            var sent: [(device: Int, correlation: UInt32)] = []
            for index in 0..<guesses {
                let login = Login(user: "alice", password: Array("guess\(index)".utf8), deviceID: "phone")
                sent.append((index % 2, try devices[index % 2].send(.login(login))))
            }
            for (device, correlation) in sent {
                #expect(errorStatus(try devices[device].reply(to: correlation)) == .badCredentials)
            }
            #expect(waitUntil(timeoutSeconds: 10) {
                (try? database.sql("SELECT failures FROM login_pairs WHERE user_name = 'alice'").int64(0, 0)) == Int64(guesses)
            }, "every failure counts once: \((try? database.sql("SELECT failures FROM login_pairs").rows) ?? [])")
            #expect(waitUntil(timeoutSeconds: 10) {
                let spent = 1_000 * 3_600_000 - ((try? database.sql("SELECT credit_ms FROM login_budgets").int64(0, 0)) ?? 0)
                return spent <= Int64(guesses) * 3_600_000 && spent > Int64(guesses) * 3_600_000 - 60_000
            }, "each took its cost from the address's budget, less the minute or so that refilled: \((try? database.sql("SELECT * FROM login_budgets").rows) ?? [])")
            for store in [a, b] {
                let right = try store.device().request(.login(Login(user: "alice", password: Array("alice-pw".utf8), deviceID: "phone")))
                #expect(errorStatus(right) == .rateLimited,
                        "the limit is reached at either store: \((try? database.sql("SELECT * FROM login_pairs").rows) ?? [])")
            }
        }
    }

    @Test("[8-11] [8-12] an address spraying user names over two stores spends one budget; a trusted pair is not held to it")
    func addressBudgetShared() async throws {
        try await onOwnThread {
            let (database, a, b) = try twoStores {
                $0.settings.loginFailuresPerAddress = 4
                $0.settings.loginFailureRefillMs = 60_000
            }
            try database.enroll("bob-phone", user: "bob")
            // bob logs in once from this address first: trusted here from then on.
            #expect(try b.device().request(.login(Login(user: "bob", password: Array("bob-pw".utf8), deviceID: "bob-phone"))).type == .loginOK)
            #expect(waitUntil(timeoutSeconds: 5) {
                (try? database.sql("SELECT count(*) FROM login_pairs WHERE user_name = 'bob' AND trusted_until > 0").int64(0, 0)) == 1
            })
            for index in 0..<4 {
                let store = index % 2 == 0 ? a : b
                let reply = try store.device().request(.login(Login(user: "nobody\(index)", password: Array("x".utf8), deviceID: "d")))
                #expect(errorStatus(reply) == .badCredentials)
                #expect(waitUntil(timeoutSeconds: 5) {
                    (try? database.sql("SELECT count(*) FROM login_pairs WHERE user_name LIKE 'nobody%'").int64(0, 0)) == Int64(index + 1)
                })
            }
            #expect(try database.sql("SELECT credit_ms < 60000 FROM login_budgets").rows == [[.bool(true)]])
            let sprayed = try a.device().request(.login(Login(user: "nobody9", password: Array("x".utf8), deviceID: "d")))
            #expect(errorStatus(sprayed) == .rateLimited, "the budget four failures at two stores spent")
            let trusted = try a.device().request(.login(Login(user: "bob", password: Array("bob-pw".utf8), deviceID: "bob-phone")))
            #expect(trusted.type == .loginOK, "[8-12] trusted at B, so not held back at A either")
        }
    }

    @Test("[4.10-1] [4.10-2] ACKs racing at two stores count once per device, and a read limit of 1 is reached once")
    func racingAcks() async throws {
        let (database, a, b) = try await onOwnThread { try twoStores() }
        let ids = try await onOwnThread {
            let provider = try a.provider()
            return try (0..<20).map { index in try a.store("race \(index)", readLimit: 1, via: provider) }
        }
        let phone = try await onOwnThread { try a.token("alice", device: "phone") }
        let tablet = try await onOwnThread { try b.token("alice", device: "tablet") }
        // Each device acknowledges every payload through both stores at once, pipelined.
        let plans: [(PostgresStoreClient, [UInt8])] = [(a, phone), (b, phone), (a, tablet), (b, tablet)]
        let replies = try await concurrently(plans.count) { index in
            let (store, token) = plans[index]
            let device = try store.device()
            let sent = try ids.map { try device.send(.ack(Ack(id: $0, token: token))) }
            return try sent.map { _ in try device.receive().message.type }
        }
        #expect(replies.allSatisfy { $0.allSatisfy { $0 == .ackOK } }, "\(replies)")
        let rows = try database.sql("""
            SELECT read_count, life, body IS NULL, (SELECT count(*) FROM receipts r WHERE r.seq = p.seq) FROM payloads p ORDER BY seq
            """)
        #expect(rows.rows.count == 20)
        // The first receipt read each out, with no receipt row; the other device's changed nothing.
        #expect(rows.rows.allSatisfy { $0 == [.int64(1), .int32(3), .bool(true), .int64(0)] }, "\(rows.rows)")
    }

    @Test("[4.9-1] [4.9-2] a STORE committing at one store while a later one commits at the other is not skipped by SYNC's cursor")
    func syncCursorOverSlowCommit() async throws {
        try await onOwnThread {
            let (database, a, b) = try twoStores()
            // The database holds a STORE with read limit 7777 after it has taken its seq, as a
            // slow commit would, until the test lets go of an advisory lock.
            _ = try database.sql("SELECT 1 FROM pg_advisory_lock(7777)")
            _ = try database.sql("""
                CREATE FUNCTION slow_for_test() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
                    IF NEW.read_limit = 7777 THEN PERFORM pg_advisory_xact_lock_shared(7777); END IF;
                    RETURN NEW;
                END $$
                """)
            _ = try database.sql("CREATE TRIGGER slow BEFORE INSERT ON payloads FOR EACH ROW EXECUTE FUNCTION slow_for_test()")
            let token = try a.token()
            let device = try b.device()
            let slowProvider = try a.provider()
            let slow = try slowProvider.send(.store(StoreRequest(user: "alice", payload: Array("slow".utf8), readLimit: 7777)))
            func lockWaiters() -> Int64? {
                try? database.sql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").int64(0, 0)
            }
            #expect(waitUntil { lockWaiters() == 1 }, "the slow STORE waits in its trigger, its seq taken")
            // A later STORE for the same user at the other store waits for the first to
            // commit (the recipients' lock), so it cannot take a seq SYNC would list first.
            let quickProvider = try b.provider()
            let quickRequest = try quickProvider.send(.store(StoreRequest(user: "alice", payload: Array("quick".utf8))))
            #expect(waitUntil { lockWaiters() == 2 }, "the quick STORE waits for the slow one's recipients")
            var seen: [PayloadID] = []
            guard case .syncOK(let first) = try device.request(.sync(Sync(token: token))) else { Issue.record("SYNC"); return }
            seen += first.ids
            _ = try database.sql("SELECT 1 FROM pg_advisory_unlock(7777)")
            guard case .storeOK(let slowOK) = try slowProvider.reply(to: slow) else { Issue.record("slow STORE"); return }
            guard case .storeOK(let quickOK) = try quickProvider.reply(to: quickRequest) else { Issue.record("quick STORE"); return }
            let quick = quickOK.id
            guard case .syncOK(let second) = try device.request(.sync(Sync(token: token, cursor: first.cursor))) else { Issue.record("SYNC"); return }
            seen += second.ids
            #expect(Set(seen) == [slowOK.id, quick], "listed \(seen.count) of 2")
        }
    }

    @Test("[4.7-4] two stores sweeping the same expired payloads at once empty each exactly once")
    func sweepingTogether() async throws {
        try await onOwnThread {
            let database = try PostgresDeployment()
            let clock = ManualClock()
            let a = database.client(try database.startStore(clock: clock) { $0.settings.sweepIntervalMs = 50 })
            let b = database.client(try database.startStore(clock: clock) { $0.settings.sweepIntervalMs = 50 })
            let provider = try a.provider()
            let sent = try (0..<600).map { try provider.send(.store(StoreRequest(user: $0 % 2 == 0 ? "alice" : "bob", payload: [1], ttlSeconds: 1))) }
            for _ in sent { #expect(try provider.receive().message.type == .storeOK) }
            clock.advance(byMs: 2_000)
            #expect(waitUntil(timeoutSeconds: 10) {
                (try? database.sql("SELECT count(*) FROM payloads WHERE life = 4 AND body IS NULL").int64(0, 0)) == 600
            })
            #expect(try database.sql("SELECT count(*) FROM payloads WHERE life <> 4 OR body IS NOT NULL OR key_id IS NOT NULL").int64(0, 0) == 0)
            #expect(b.service.onLoop { $0.readiness() } == .ready)
        }
    }

    @Test("[4.11-1] [4.8-1] RECALL at one store racing FETCH at the other: each FETCH gets the payload or GONE, and GONE after")
    func recallRacingFetch() async throws {
        let (_, a, b) = try await onOwnThread { try twoStores() }
        let ids = try await onOwnThread {
            let provider = try a.provider()
            return try (0..<30).map { index in try a.store("body \(index)", via: provider) }
        }
        let token = try await onOwnThread { try b.token() }
        let outcomes = try await concurrently(2) { side -> [Message] in
            if side == 0 {
                let provider = try a.provider()
                let sent = try ids.map { try provider.send(.recall(Recall(id: $0))) }
                return try sent.map { _ in try provider.receive().message }
            }
            let device = try b.device()
            var replies: [UInt32: Message] = [:]
            let sent = try ids.map { try device.send(.fetch(Fetch(id: $0, token: token))) }
            for _ in sent {
                let frame = try device.receive()
                replies[frame.header.correlation] = frame.message
            }
            return sent.compactMap { replies[$0] }
        }
        #expect(outcomes[0].allSatisfy { $0.type == .recallOK })
        for (index, reply) in outcomes[1].enumerated() {
            switch reply {
            case .fetchOK(let fetched): #expect(fetched.payload == Array("body \(index)".utf8))
            default: #expect(errorStatus(reply) == .gone, "\(reply)")
            }
        }
        try await onOwnThread {
            let device = try a.device()
            for id in ids { #expect(errorStatus(try device.request(.fetch(Fetch(id: id, token: token)))) == .gone) }
        }
    }
}
