import PushWire

/// Pipelined requests, max_inflight and stray replies (section 5.3).
enum PipelineCases {
    static let all: [ConformanceCase] = [
        ConformanceCase("conn.pipeline-ping", clause: "5.3-1", "200 pipelined PINGs all come back with their ids") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            let ids = (0..<200).map { UInt32(1_000 + $0) }
            try session.sendRaw(ids.flatMap { Message.ping.encoded(correlation: $0) }, "200 PINGs")
            let answers = try session.answers(to: ids, "200 pipelined PINGs")
            let wrong = answers.filter { $0.value != .pong }
            try Expect.that(wrong.isEmpty, "\(wrong.count) of 200 PINGs were not answered PONG, e.g. \(wrong.first.map { describe($0.value) } ?? "")")
            return "200 PONGs, every correlation id once"
        },

        ConformanceCase("conn.pipeline-store", clause: "5.3-2", "100 pipelined STOREs all come back, matched by correlation id") { ctx throws(CaseStop) in
            let user = try ctx.user()
            let session = try ctx.storeProvider(maxInflight: 128)
            let window = Int(min(100, max(1, session.negotiatedInflight)))
            var ids: [UInt32] = []
            var storeIDs = Set<PayloadID>()
            var sent = 0
            while sent < 100 {
                let count = min(window, 100 - sent)
                let batch = (0..<count).map { _ in session.takeCorrelation() }
                var bytes: [UInt8] = []
                for (index, id) in batch.enumerated() {
                    Message.store(StoreRequest(user: user, payload: Array("pipelined \(sent + index)".utf8), ttlSeconds: 300)).encode(correlation: id, into: &bytes)
                }
                try session.sendRaw(bytes, "\(count) STOREs")
                for (id, answer) in try session.answers(to: batch, "\(count) pipelined STOREs") {
                    guard case .storeOK(let stored) = answer else { throw .fail("pipelined STORE \(id) was answered \(describe(answer))") }
                    ctx.noteStored(stored.id)
                    storeIDs.insert(stored.id)
                }
                ids += batch
                sent += count
            }
            try Expect.equal(storeIDs.count, 100, "distinct store ids among 100 STORE_OKs")
            return "100 STORE_OKs in windows of \(window) (max_inflight), each correlation once, 100 distinct ids"
        },

        ConformanceCase("conn.busy", clause: "5.3-4", "a request over max_inflight is answered BUSY; PING is exempt") { ctx throws(CaseStop) in
            let session = try ctx.storeProvider(maxInflight: 1)
            guard session.negotiatedInflight == 1 else { throw .skip("max_inflight 1 was answered \(session.negotiatedInflight)") }
            // A STORE waits for the store's durable write, so the second arrives while the
            // first is still outstanding.
            let user = try ctx.user()
            var bytes = Message.store(StoreRequest(user: user, payload: Array("busy-1".utf8), ttlSeconds: 60)).encoded(correlation: 31)
            bytes += Message.store(StoreRequest(user: user, payload: Array("busy-2".utf8), ttlSeconds: 60)).encoded(correlation: 32)
            bytes += Message.ping.encoded(correlation: 33)
            try session.sendRaw(bytes, "two STOREs and a PING")
            let answers = try session.answers(to: [31, 32, 33], "two STOREs and a PING with max_inflight 1")
            try Expect.that(answers[33] == .pong, "PING with max_inflight exhausted was answered \(answers[33].map(describe) ?? "nothing"); PING is exempt")
            if case .storeOK(let stored)? = answers[31] {
                _ = try? session.request(.recall(Recall(id: stored.id)), "clean-up RECALL")
            }
            guard case .error(let second) = answers[32], second.status == .busy else {
                if case .storeOK = answers[32] {
                    throw .skip("not observable: the first STORE was committed before the second arrived")
                }
                throw .fail("the second STORE over max_inflight 1 was answered \(answers[32].map(describe) ?? "nothing"), expected ERROR BUSY")
            }
            return "STORE → STORE_OK, second STORE → BUSY, PING → PONG"
        },

        ConformanceCase("conn.stray-replies", clause: "5.3-5", "replies that match no request are discarded") { ctx throws(CaseStop) in
            let session = try ctx.storeDevice()
            var bytes = Message.pong.encoded(correlation: 777)
            bytes += Message.ackOK(AckOK(id: PayloadID.random())).encoded(correlation: 778)
            bytes += Message.pushAck(PushAck(written: 1, queued: 0)).encoded(correlation: 779)
            bytes += Message.deliveryAck(DeliveryAck(id: [1, 2, 3])).encoded(correlation: 780)
            try session.sendRaw(bytes, "four unsolicited replies")
            try session.expectSilence(ms: ctx.quietMs, "unsolicited PONG, ACK_OK, PUSH_ACK and DELIVERY_ACK")
            try session.expectAlive("unsolicited replies")
            return "no answer to four stray replies; PING still answered"
        },
    ]
}
