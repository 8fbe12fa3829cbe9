import PushClock
import PushSession
import PushWire

/// STORE (section 4.7): durability, fresh ids, refusals and expiry.
extension StoreCases {
    static let storing: [ConformanceCase] = [
        ConformanceCase("store.store-ok", clause: "4.7-1", "STORE_OK names a payload that is there for the next connection") { ctx throws(CaseStop) in
            let fixture = try StoreFixture(ctx)
            let payload = Array("durable \(ctx.unique("p"))".utf8)
            let stored = try fixture.store(payload: payload)
            let other = try ctx.storeProvider()
            let answer = try other.request(.status(StatusRequest(id: stored.id)))
            guard case .statusOK(let status) = answer, status.state == .stored else { throw .fail("STATUS on a new connection right after STORE_OK was answered \(describe(answer))") }
            guard case .fetchOK(let fetched) = try fixture.fetch(stored.id, token: fixture.token), fetched.payload == payload else {
                throw .fail("FETCH right after STORE_OK did not return the payload")
            }
            return "STORE_OK \(stored.id); STATUS from another connection: stored; FETCH returns the bytes"
        },

        ConformanceCase("store.ids-fresh", clause: "4.7-2", "every STORE gets a new 16-byte id") { ctx throws(CaseStop) in
            let fixture = try StoreFixture(ctx)
            var ids = Set<PayloadID>(), halves = Set<UInt64>()
            for _ in 0..<20 {
                let id = try fixture.store(ttl: 60).id
                ids.insert(id)
                halves.insert(id.high)
                halves.insert(id.low)
            }
            try Expect.equal(ids.count, 20, "distinct ids among 20 STOREs")
            try Expect.equal(halves.count, 40, "distinct 64-bit halves among 20 ids (random ids share none)")
            return "20 distinct ids with 40 distinct halves (randomness itself is not judged)"
        },

        ConformanceCase("store.unknown-user", clause: "4.7-3", "STORE for a user the store does not know is UNKNOWN_USER") { ctx throws(CaseStop) in
            let session = try ctx.storeProvider()
            try Expect.refused(session, .store(StoreRequest(user: ctx.unique("nobody"), payload: [1, 2, 3])), .unknownUser, "STORE for an unknown user")
            return "UNKNOWN_USER"
        },

        ConformanceCase("store.too-large", clause: "4.7-3", "STORE of a payload over the store's maximum is TOO_LARGE") { ctx throws(CaseStop) in
            let user = try ctx.user()
            let session = try ctx.storeProvider(maxFrame: FrameLimits.ceiling)
            let frameLimit = Int(session.negotiatedMaxFrame ?? FrameLimits.defaultMaxFrame)
            // The largest payload that still fits a frame; a store whose maximum is even
            // larger cannot show TOO_LARGE on this connection.
            let size = frameLimit - 16 - 64 - user.utf8.count
            let answer = try session.request(.store(StoreRequest(user: user, payload: [UInt8](repeating: 0x42, count: size), ttlSeconds: 60)))
            if case .storeOK(let stored) = answer {
                ctx.noteStored(stored.id)
                throw .skip("a \(size)-byte payload was accepted; the store's maximum is not reachable within max_frame \(frameLimit)")
            }
            try Expect.error(answer, .tooLarge, "STORE of \(size) bytes")
            try session.expectAlive("TOO_LARGE")
            return "\(size)-byte payload → TOO_LARGE"
        },

        ConformanceCase("store.ttl-zero", clause: "4.7-3", "STORE with ttl_s 0 is BAD_REQUEST") { ctx throws(CaseStop) in
            let user = try ctx.user()
            let session = try ctx.storeProvider()
            try Expect.refused(session, .store(StoreRequest(user: user, payload: [1], ttlSeconds: 0)), .badRequest, "STORE with ttl_s 0")
            return "BAD_REQUEST"
        },

        ConformanceCase("store.expiry", clause: "4.7-4", "a payload expires ttl_s after STORE and STORE_OK says when") { ctx throws(CaseStop) in
            let fixture = try StoreFixture(ctx)
            let before = Clocks.wallMilliseconds()
            let minute = try fixture.store(ttl: 60)
            let after = Clocks.wallMilliseconds()
            try Expect.that(minute.expiresAt > after && minute.expiresAt <= after + 60_000 + 2_000,
                            "ttl_s 60 gave expires_at \(Int64(minute.expiresAt) - Int64(before)) ms after the STORE was sent")
            try Expect.equal(try fixture.status(minute.id).expiresAt, minute.expiresAt, "STATUS_OK expires_at against STORE_OK's")
            let second = try fixture.store(ttl: 1)
            Pause.sleep(ms: 1_300)
            let status = try fixture.status(second.id)
            try Expect.equal(status.state, .gone, "state 1.3 s after a STORE with ttl_s 1")
            try fixture.fetchRefused(second.id, token: fixture.token, .gone, "FETCH of an expired payload")
            return "ttl_s 60 → expires in \((minute.expiresAt - before) / 1000) s; ttl_s 1 → gone after 1.3 s"
        },
    ]
}
