import PushWire

/// ACK, RECALL and STATUS (sections 4.10 to 4.12).
extension StoreCases {
    static let receipts: [ConformanceCase] = [
        ConformanceCase("store.ack-read-limit", clause: "4.10-1", "ACKs from read_limit distinct devices make a payload gone") { ctx throws(CaseStop) in
            let fixture = try StoreFixture(ctx)
            let stored = try fixture.store(readLimit: 2)
            func ack(_ token: [UInt8], _ what: String) throws(CaseStop) {
                let answer = try fixture.device.request(.ack(Ack(id: stored.id, token: token)))
                guard case .ackOK(let ok) = answer, ok.id == stored.id else { throw .fail("\(what) was answered \(describe(answer))") }
            }
            try ack(fixture.token, "the first device's ACK")
            try ack(fixture.token, "the first device's ACK again")
            guard case .fetchOK = try fixture.fetch(stored.id, token: fixture.token) else { throw .fail("one device of read_limit 2 made the payload unreadable") }
            try ack(try fixture.secondDeviceToken(), "a second device's ACK")
            try fixture.fetchRefused(stored.id, token: fixture.token, .gone, "FETCH after two devices ACKed a payload with read_limit 2")
            try Expect.equal(try fixture.status(stored.id).state, .gone, "STATUS state")
            return "read_limit 2: one device (twice) → still readable; second device → GONE"
        },

        ConformanceCase("store.ack-checks", clause: "4.10-1", "ACK makes FETCH's checks up to FORBIDDEN") { ctx throws(CaseStop) in
            let fixture = try StoreFixture(ctx)
            let stored = try fixture.store()
            try Expect.refused(fixture.device, .ack(Ack(id: stored.id, token: try fixture.expiredToken())), .tokenExpired, "ACK with an expired token")
            try Expect.refused(fixture.device, .ack(Ack(id: PayloadID.random(), token: fixture.token)), .notFound, "ACK of an unknown id")
            try Expect.refused(fixture.device, .ack(Ack(id: stored.id, token: try fixture.otherUserToken())), .forbidden, "ACK of another user's payload")
            return "TOKEN_EXPIRED, NOT_FOUND, FORBIDDEN"
        },

        ConformanceCase("store.ack-idempotent", clause: "4.10-2", "ACK again, or ACK of a gone payload, succeeds") { ctx throws(CaseStop) in
            let fixture = try StoreFixture(ctx)
            let stored = try fixture.store()
            for what in ["ACK", "the same ACK again"] {
                let answer = try fixture.device.request(.ack(Ack(id: stored.id, token: fixture.token)))
                guard case .ackOK = answer else { throw .fail("\(what) was answered \(describe(answer))") }
            }
            let gone = try fixture.recalled()
            let answer = try fixture.device.request(.ack(Ack(id: gone, token: fixture.token)))
            guard case .ackOK = answer else { throw .fail("ACK of a recalled payload was answered \(describe(answer))") }
            return "ACK_OK, ACK_OK, and ACK_OK for a recalled payload"
        },

        ConformanceCase("store.recall", clause: "4.11-1", "RECALL makes a payload gone at once") { ctx throws(CaseStop) in
            let fixture = try StoreFixture(ctx)
            let stored = try fixture.store(ttl: 300)
            let answer = try fixture.provider.request(.recall(Recall(id: stored.id)))
            guard case .recallOK(let ok) = answer, ok.id == stored.id else { throw .fail("RECALL was answered \(describe(answer))") }
            try fixture.fetchRefused(stored.id, token: fixture.token, .gone, "FETCH after RECALL")
            try Expect.equal(try fixture.status(stored.id).state, .gone, "STATUS state after RECALL")
            let listed = try fixture.syncAllOrSkip(token: fixture.token)
            try Expect.that(!listed.contains(stored.id), "SYNC lists a recalled payload")
            return "RECALL_OK; FETCH GONE; STATUS gone; SYNC no longer lists it"
        },

        ConformanceCase("store.recall-edges", clause: "4.11-2", "RECALL of an unknown id is NOT_FOUND; of a gone payload, RECALL_OK") { ctx throws(CaseStop) in
            let fixture = try StoreFixture(ctx)
            try Expect.refused(fixture.provider, .recall(Recall(id: PayloadID.random())), .notFound, "RECALL of an unknown id")
            let gone = try fixture.recalled()
            let again = try fixture.provider.request(.recall(Recall(id: gone)))
            guard case .recallOK = again else { throw .fail("a second RECALL was answered \(describe(again))") }
            return "NOT_FOUND; RECALL twice → RECALL_OK twice"
        },

        ConformanceCase("store.status", clause: "4.12-1", "STATUS: 1 stored, 2 fetched, 3 gone; unknown id NOT_FOUND") { ctx throws(CaseStop) in
            let fixture = try StoreFixture(ctx)
            try Expect.refused(fixture.provider, .status(StatusRequest(id: PayloadID.random())), .notFound, "STATUS of an unknown id")
            let stored = try fixture.store()
            try Expect.equal(try fixture.status(stored.id).state, .stored, "state of a fresh payload")
            guard case .fetchOK = try fixture.fetch(stored.id, token: fixture.token) else { throw .fail("FETCH failed") }
            try Expect.equal(try fixture.status(stored.id) { $0.state == .fetched }.state, .fetched, "state after FETCH (waited up to 3 s)")
            guard case .recallOK = try fixture.provider.request(.recall(Recall(id: stored.id))) else { throw .fail("RECALL failed") }
            try Expect.equal(try fixture.status(stored.id).state, .gone, "state after RECALL")
            return "NOT_FOUND; stored → fetched → gone"
        },

        ConformanceCase("store.status-key-holders", clause: "4.12-4",
                        "the provider key's holders are one provider: a payload stored on one provider connection is asked about and recalled on another") { ctx throws(CaseStop) in
            let fixture = try StoreFixture(ctx)
            let stored = try fixture.store(ttl: 300)
            let elsewhere = try ctx.storeProvider()
            let status = try elsewhere.request(.status(StatusRequest(id: stored.id)))
            guard case .statusOK(let ok) = status, ok.id == stored.id else {
                throw .fail("STATUS on another provider connection was answered \(describe(status))")
            }
            let recalled = try elsewhere.request(.recall(Recall(id: stored.id)))
            guard case .recallOK = recalled else { throw .fail("RECALL on another provider connection was answered \(describe(recalled))") }
            try Expect.equal(try fixture.status(stored.id).state, .gone, "STATUS on the first connection after the other's RECALL")
            return "STATUS_OK and RECALL_OK on a second connection; gone on the first"
        },
    ]
}
