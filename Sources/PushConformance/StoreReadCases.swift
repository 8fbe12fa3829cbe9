import PushWire

/// FETCH and SYNC (sections 4.8, 4.9, 8): who may read, in which order failures are
/// reported, statistics and paging.
extension StoreCases {
    static let reading: [ConformanceCase] = [
        ConformanceCase("store.fetch-recipient-only", clause: "8-2", "reading a payload takes the recipient's token") { ctx throws(CaseStop) in
            let fixture = try StoreFixture(ctx)
            let payload = Array("for the recipient only \(ctx.unique("p"))".utf8)
            let stored = try fixture.store(payload: payload)
            let answer = try fixture.fetch(stored.id, token: fixture.token)
            guard case .fetchOK(let fetched) = answer else { throw .fail("FETCH with the recipient's token was answered \(describe(answer))") }
            try Expect.equal(fetched.id, stored.id, "FETCH_OK id")
            try Expect.equal(fetched.payload, payload, "FETCH_OK payload")
            try Expect.equal(fetched.expiresAt, stored.expiresAt, "FETCH_OK expires_at")
            try Expect.that(fetched.createdAt <= fetched.expiresAt, "created_at \(fetched.createdAt) after expires_at")
            try fixture.fetchRefused(stored.id, token: try fixture.otherUserToken(), .forbidden, "FETCH with another user's token")
            try fixture.fetchRefused(stored.id, token: nil, .authRequired, "FETCH without token")
            return "recipient → FETCH_OK with the bytes; other user → FORBIDDEN; no token → AUTH_REQUIRED"
        },

        ConformanceCase("store.read-failures", clause: "8-3", "each reason a read fails has its own status") { ctx throws(CaseStop) in
            let fixture = try StoreFixture(ctx)
            let live = try fixture.store().id
            let gone = try fixture.recalled()
            try fixture.fetchRefused(live, token: nil, .authRequired, "no token")
            try fixture.fetchRefused(live, token: [0x01, 0x02, 0x03], .badToken, "a 3-byte token")
            try fixture.fetchRefused(live, token: try fixture.expiredToken(), .tokenExpired, "an expired token")
            try fixture.fetchRefused(PayloadID.random(), token: fixture.token, .notFound, "an unknown id")
            try fixture.fetchRefused(live, token: try fixture.otherUserToken(), .forbidden, "another user's payload")
            try fixture.fetchRefused(gone, token: fixture.token, .gone, "a recalled payload")
            return "AUTH_REQUIRED, BAD_TOKEN, TOKEN_EXPIRED, NOT_FOUND, FORBIDDEN, GONE"
        },

        ConformanceCase("store.fetch-check-order", clause: "4.8-1", "FETCH reports the first failure in the spec's order") { ctx throws(CaseStop) in
            let fixture = try StoreFixture(ctx)
            let unknown = PayloadID.random()
            let gone = try fixture.recalled()
            let other = try fixture.otherUserToken()
            try fixture.fetchRefused(unknown, token: nil, .authRequired, "no token and an unknown id")
            try fixture.fetchRefused(unknown, token: [0x01] + [UInt8](repeating: 0, count: 40), .badToken, "a bad token and an unknown id")
            try fixture.fetchRefused(gone, token: try fixture.expiredToken(), .tokenExpired, "an expired token and a gone payload")
            try fixture.fetchRefused(unknown, token: other, .notFound, "another user's token and an unknown id")
            try fixture.fetchRefused(gone, token: other, .forbidden, "another user's token and a gone payload")
            try fixture.fetchRefused(gone, token: fixture.token, .gone, "the recipient's token and a gone payload")
            return "AUTH_REQUIRED < BAD_TOKEN < TOKEN_EXPIRED < NOT_FOUND < FORBIDDEN < GONE"
        },

        ConformanceCase("store.missing-token", clause: "4.8-2", "a missing token is AUTH_REQUIRED in FETCH, SYNC and ACK") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            try Expect.refused(session, .fetch(Fetch(id: PayloadID.random(), token: nil)), .authRequired, "FETCH without token")
            try Expect.refused(session, .sync(Sync(token: nil)), .authRequired, "SYNC without token")
            try Expect.refused(session, .ack(Ack(id: PayloadID.random(), token: nil)), .authRequired, "ACK without token")
            return "AUTH_REQUIRED three times, never BAD_REQUEST"
        },

        ConformanceCase("store.fetch-counts", clause: "4.8-3", "each FETCH adds one to the fetch count and sets the fetched time") { ctx throws(CaseStop) in
            let fixture = try StoreFixture(ctx)
            let stored = try fixture.store()
            let fresh = try fixture.status(stored.id)
            try Expect.that(fresh.fetchCount == 0 && fresh.fetchedAt == 0 && fresh.state == .stored,
                            "a fresh payload has fetch_count \(fresh.fetchCount), fetched_at \(fresh.fetchedAt), state \(fresh.state)")
            for _ in 0..<2 {
                guard case .fetchOK = try fixture.fetch(stored.id, token: fixture.token) else { throw .fail("FETCH of a fresh payload failed") }
            }
            let status = try fixture.status(stored.id) { $0.fetchCount >= 2 }
            try Expect.equal(status.fetchCount, 2, "fetch_count after two FETCHes (waited up to 3 s)")
            try Expect.equal(status.state, .fetched, "state after FETCH")
            try Expect.that(status.fetchedAt >= status.createdAt, "fetched_at \(status.fetchedAt) before created_at \(status.createdAt)")
            return "fetch_count 0 → 2, state fetched, fetched_at set"
        },

        ConformanceCase("store.sync-unread", clause: "4.9-1", "SYNC lists the user's live ids this device has not ACKed, newest first") { ctx throws(CaseStop) in
            let fixture = try StoreFixture(ctx)
            let a = try fixture.store(ttl: 300).id, b = try fixture.store(ttl: 300).id, c = try fixture.store(ttl: 300).id
            let listed = try fixture.syncAllOrSkip(token: fixture.token)
            let positions = [a, b, c].map { listed.firstIndex(of: $0) }
            guard let pa = positions[0], let pb = positions[1], let pc = positions[2] else { throw .fail("SYNC did not list all three new payloads") }
            try Expect.that(pa > pb && pb > pc, "SYNC listed three payloads other than newest first")
            guard case .ackOK = try fixture.device.request(.ack(Ack(id: a, token: fixture.token))) else { throw .fail("ACK failed") }
            guard case .recallOK = try fixture.provider.request(.recall(Recall(id: b))) else { throw .fail("RECALL failed") }
            let after = try fixture.syncAllOrSkip(token: fixture.token)
            try Expect.that(!after.contains(a), "SYNC still lists a payload this device ACKed")
            try Expect.that(!after.contains(b), "SYNC still lists a recalled payload")
            try Expect.that(after.contains(c), "SYNC no longer lists an unread payload")
            let otherDevice = try fixture.secondDeviceToken()
            let elsewhere = try fixture.syncAllOrSkip(token: otherDevice)
            try Expect.that(elsewhere.contains(a) && elsewhere.contains(c) && !elsewhere.contains(b), "another device's SYNC must list the ACKed and unread payloads and not the recalled one")
            let stranger = try fixture.syncAllOrSkip(token: try fixture.otherUserToken())
            try Expect.that(!stranger.contains(a) && !stranger.contains(c), "another user's SYNC lists this user's payloads")
            return "newest first; ACKed hidden for this device only; recalled hidden; other users see nothing"
        },

        ConformanceCase("store.sync-cursor", clause: "4.9-2", "SYNC pages follow the cursor the previous page returned") { ctx throws(CaseStop) in
            let fixture = try StoreFixture(ctx)
            let ours = [try fixture.store(ttl: 300).id, try fixture.store(ttl: 300).id, try fixture.store(ttl: 300).id]
            let whole = try fixture.syncAllOrSkip(token: fixture.token)
            let paged = try fixture.syncAllOrSkip(token: fixture.token, limit: 1, maxPages: 300)
            try Expect.that(Set(paged).count == paged.count, "paging listed an id twice")
            // Only this case's ids are compared: another client of the same user may store
            // or recall payloads between the two listings.
            let mine = Set(ours)
            try Expect.that(paged.filter(mine.contains) == ours.reversed(), "pages of 1 did not list the three new payloads once each, newest first")
            try Expect.that(whole.filter(mine.contains) == ours.reversed(), "one page of up to 1000 did not list the three new payloads newest first")
            return "\(paged.count) pages of 1 list the new payloads as one full page does, no repeats"
        },

        ConformanceCase("store.sync-limit", clause: "4.9-3", "a limit of 0 counts as 1; no page holds more than 1000") { ctx throws(CaseStop) in
            let fixture = try StoreFixture(ctx)
            _ = try fixture.store(ttl: 300)
            _ = try fixture.store(ttl: 300)
            let answer = try fixture.device.request(.sync(Sync(token: fixture.token, limit: 0)))
            guard case .syncOK(let page) = answer else { throw .fail("SYNC with limit 0 was answered \(describe(answer))") }
            try Expect.equal(page.ids.count, 1, "ids in a SYNC_OK for limit 0 with two unread payloads")
            try Expect.that(page.hasMore, "has_more after one of two unread ids")
            let big = try fixture.device.request(.sync(Sync(token: fixture.token, limit: 5_000)))
            guard case .syncOK(let large) = big else { throw .fail("SYNC with limit 5000 was answered \(describe(big))") }
            try Expect.that(large.ids.count <= 1000 && large.ids.count >= 2, "SYNC with limit 5000 returned \(large.ids.count) ids")
            return "limit 0 → 1 id and has_more; limit 5000 → \(large.ids.count) ids"
        },

        ConformanceCase("store.sync-older-count", clause: "4.9-5", "a listing's first page counts the older unread ids it did not send; later pages do not") { ctx throws(CaseStop) in
            let fixture = try StoreFixture(ctx)
            let ours = [try fixture.store(ttl: 300).id, try fixture.store(ttl: 300).id, try fixture.store(ttl: 300).id]
            let whole = try fixture.syncAllOrSkip(token: fixture.token)
            let answer = try fixture.device.request(.sync(Sync(token: fixture.token, limit: 1)))
            guard case .syncOK(let first) = answer else { throw .fail("SYNC with limit 1 was answered \(describe(answer))") }
            try Expect.that(first.hasMore, "has_more after one of at least three unread ids")
            // Another client of the same user may store or recall meanwhile: ours are older than
            // what it stores, so at least two of them stay counted.
            try Expect.that(first.olderCount >= 2, "older_count \(first.olderCount) with at least three unread ids and a page of 1")
            try Expect.that(Int(first.olderCount) + 1 >= whole.filter(Set(ours).contains).count, "older_count does not cover the ids not sent")
            let next = try fixture.device.request(.sync(Sync(token: fixture.token, cursor: first.cursor, limit: 1)))
            guard case .syncOK(let second) = next else { throw .fail("SYNC from the first page's cursor was answered \(describe(next))") }
            try Expect.equal(second.olderCount, 0, "older_count in a page after the first")
            return "first page of 1: older_count \(first.olderCount) of \(whole.count) unread; the next page carries none"
        },
    ]
}
