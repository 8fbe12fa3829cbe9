import PushClock
import PushSecurity
import PushSession
import PushWire

/// The store's registry over the wire (section 4.16): REGISTRY from a gateway connection
/// and nothing else from it, pages, cursors, limits and the held request. The cases that
/// change the registry enroll and revoke in the store's database (`SuiteRegistry`), and
/// look only at their own entries: other clients may change the registry meanwhile.
enum RegistryCases {
    /// A connection with role gateway and a fresh gateway credential ([7.1-2]).
    static func gateway(_ ctx: CaseContext, maxInflight: UInt32? = nil) throws(CaseStop) -> WireSession {
        let keys = try ctx.keys()
        let credential = HelloCredential.gateway(keys.serverKey).make(for: .store, nowMs: Clocks.wallMilliseconds())
        let session = try ctx.connectStore()
        _ = try session.open(CaseContext.hello(.gateway, credential: credential, maxInflight: maxInflight))
        return session
    }

    static func page(_ session: WireSession, cursor: UInt64 = 0, limit: UInt32 = RegistryRequest.maxLimit,
                     waitMs: UInt32 = 0, _ what: String) throws(CaseStop) -> RegistryOK {
        let answer = try session.request(.registry(RegistryRequest(cursor: cursor, limit: limit, waitMs: waitMs)), what)
        guard case .registryOK(let ok) = answer else { throw .fail("\(what) was answered \(describe(answer)), expected REGISTRY_OK") }
        try Expect.that(ok.cursor >= cursor, "\(what): REGISTRY_OK cursor \(ok.cursor) is before the request's \(cursor)")
        return ok
    }

    /// Follows the registry from `cursor` to its end; the entries and the last cursor.
    static func readAll(_ session: WireSession, from cursor: UInt64 = 0, maxPages: Int = 1_000) throws(CaseStop) -> ([RegistryEntry], UInt64) {
        var entries: [RegistryEntry] = []
        var cursor = cursor
        for _ in 0..<maxPages {
            let ok = try page(session, cursor: cursor, "REGISTRY from cursor \(cursor)")
            try Expect.that(ok.entries.isEmpty == (ok.cursor == cursor), "REGISTRY_OK with \(ok.entries.count) entries moved the cursor from \(cursor) to \(ok.cursor)")
            entries += ok.entries
            cursor = ok.cursor
            if !ok.hasMore { return (entries, cursor) }
        }
        throw .skip("the registry has more than \(maxPages) pages")
    }

    static let all: [ConformanceCase] = [
        ConformanceCase("store.registry-roles", clause: "4.1-3", "REGISTRY only from a gateway; a gateway connection may send only PING and REGISTRY") { ctx throws(CaseStop) in
            try Expect.refused(try ctx.storeDevice(), .registry(RegistryRequest()), .forbidden, "REGISTRY from a device")
            try Expect.refused(try ctx.storeProvider(), .registry(RegistryRequest()), .forbidden, "REGISTRY from a provider")
            let session = try gateway(ctx)
            try Expect.refused(session, .login(Login(user: ctx.unique("user"), password: [1], deviceID: "d")), .forbidden, "LOGIN from a gateway")
            try Expect.refused(session, .store(StoreRequest(user: ctx.unique("user"), payload: [1])), .forbidden, "STORE from a gateway")
            try Expect.refused(session, .sync(Sync(token: [1])), .forbidden, "SYNC from a gateway")
            let pong = try session.request(.ping, "PING from a gateway")
            guard case .pong = pong else { throw .fail("PING from a gateway was answered \(describe(pong))") }
            _ = try page(session, "REGISTRY from a gateway")
            return "device and provider REGISTRY → FORBIDDEN; gateway LOGIN, STORE, SYNC → FORBIDDEN; PING and REGISTRY answered"
        },

        ConformanceCase("store.registry-changes", clause: "4.16-1", "REGISTRY lists the entries changed after the cursor, oldest first") { ctx throws(CaseStop) in
            let session = try gateway(ctx)
            let (_, end) = try readAll(session)
            let first = try ctx.enrolledDevice(), second = try ctx.enrolledDevice()
            let (entries, cursor) = try readAll(session, from: end)
            let mine = entries.filter { $0.credential == first.credential || $0.credential == second.credential }
            try Expect.that(mine.map(\.credential) == [first.credential, second.credential],
                            "after enrolling two devices, REGISTRY from the old cursor listed \(mine.count) of them, not both in order")
            try Expect.that(mine.allSatisfy { $0.state == .enrolled }, "a new enrolment was listed as revoked")
            try Expect.that(cursor > end, "the cursor did not move past the new entries")
            return "two enrolments listed in order after cursor \(end), cursor now \(cursor)"
        },

        ConformanceCase("store.registry-entries", clause: "4.16-2", "each entry is a state of 1 or 2 and a registration as issued") { ctx throws(CaseStop) in
            let keys = try ctx.keys()
            let session = try gateway(ctx)
            if ctx.run.registry() != nil { _ = try ctx.enrolledDevice() }
            let ok = try page(session, "REGISTRY from cursor 0")
            guard !ok.entries.isEmpty else { throw .skip("the registry is empty; " + CaseContext.noRegistry) }
            let signer = CredentialSigner(serverKey: keys.serverKey, purpose: CredentialSigner.registrationPurpose)
            for entry in ok.entries {
                do {
                    _ = try signer.open(entry.credential) { _ in () }
                } catch {
                    throw .fail("an entry of \(entry.credential.count) bytes is not a registration signed with the deployment's key: \(error)")
                }
            }
            return "\(ok.entries.count) entries, each a registration that verifies under the registration key"
        },

        ConformanceCase("store.registry-cursor", clause: "4.16-3", "the reply's cursor is the last entry's number, or the request's; has_more says whether more follow") { ctx throws(CaseStop) in
            let session = try gateway(ctx)
            let far = UInt64.max - 1
            let beyond = try page(session, cursor: far, "REGISTRY from a cursor past every change")
            try Expect.that(beyond.entries.isEmpty && beyond.cursor == far && !beyond.hasMore,
                            "from cursor \(far): \(beyond.entries.count) entries, cursor \(beyond.cursor), has_more \(beyond.hasMore)")
            if ctx.run.registry() != nil { _ = try ctx.enrolledDevice() }
            let (entries, end) = try readAll(session)
            guard !entries.isEmpty else { throw .skip("the registry is empty; " + CaseContext.noRegistry) }
            let again = try page(session, cursor: end, "REGISTRY from the cursor of the last page")
            try Expect.that(again.entries.isEmpty ? again.cursor == end : again.cursor > end,
                            "asking again from the end: \(again.entries.count) entries and cursor \(again.cursor)")
            return "past the end: no entries, the same cursor, has_more 0; \(entries.count) entries read to cursor \(end)"
        },

        ConformanceCase("store.registry-limit", clause: "4.16-4", "a limit of 0 lists one entry; has_more when more follow") { ctx throws(CaseStop) in
            let session = try gateway(ctx)
            let (_, end) = try readAll(session)
            _ = try ctx.enrolledDevice()
            _ = try ctx.enrolledDevice()
            let one = try page(session, cursor: end, limit: 0, "REGISTRY with limit 0")
            try Expect.equal(one.entries.count, 1, "entries for limit 0 with two changes after the cursor")
            try Expect.that(one.hasMore, "has_more after one of two entries")
            let rest = try page(session, cursor: one.cursor, limit: 5_000, "REGISTRY with limit 5000")
            try Expect.that((1...1000).contains(rest.entries.count), "the page for limit 5000 held \(rest.entries.count) entries")
            return "limit 0 → 1 entry and has_more; limit 5000 → \(rest.entries.count)"
        },

        ConformanceCase("store.registry-latest-state", clause: "4.16-5", "a revoked registration is listed once, with its latest state, after the changes before it") { ctx throws(CaseStop) in
            let session = try gateway(ctx)
            let (_, end) = try readAll(session)
            let device = try ctx.enrolledDevice()
            let (before, middle) = try readAll(session, from: end)
            try ctx.registry().revoke(device.deviceID)
            let (after, last) = try readAll(session, from: end)
            let listedBefore = before.filter { $0.credential == device.credential }, listedAfter = after.filter { $0.credential == device.credential }
            try Expect.that(listedBefore.map(\.state) == [.enrolled], "the new enrolment was listed as \(listedBefore.map(\.state))")
            try Expect.that(listedAfter.map(\.state) == [.revoked],
                            "after revoking, REGISTRY from the same cursor listed it as \(listedAfter.map(\.state)), expected once, revoked")
            try Expect.that(last > middle, "the revocation did not take a greater change number: \(last) after \(middle)")
            return "enrolled at \(middle), then listed once as revoked at \(last)"
        },

        ConformanceCase("store.registry-wait", clause: "4.16-8", "a REGISTRY with wait_ms and nothing after its cursor is answered by a change, or empty when the time is up") { ctx throws(CaseStop) in
            let session = try gateway(ctx)
            var (_, cursor) = try readAll(session)
            // Another client may change the registry meanwhile: then read on and wait again.
            var empty: (RegistryOK, Int64)?
            for _ in 0..<5 where empty == nil {
                let started = Clocks.monotonicMilliseconds()
                let ok = try page(session, cursor: cursor, waitMs: 700, "REGISTRY with wait_ms 700 and nothing after its cursor")
                if ok.entries.isEmpty { empty = (ok, Clocks.monotonicMilliseconds() - started) } else { cursor = try readAll(session, from: ok.cursor).1 }
            }
            guard let (quiet, waited) = empty else { throw .skip("the registry changed during each of five waits (other clients enroll devices)") }
            try Expect.that(quiet.cursor == cursor && !quiet.hasMore, "the empty reply had cursor \(quiet.cursor), has_more \(quiet.hasMore)")
            guard ctx.run.registry() != nil else {
                return "no change: empty REGISTRY_OK after \(waited) ms (not checked: an answer on a change; " + CaseContext.noRegistry + ")"
            }
            let held = try session.send(.registry(RegistryRequest(cursor: cursor, waitMs: 20_000)))
            let sent = Clocks.monotonicMilliseconds()
            let device = try ctx.enrolledDevice()
            let answer = try session.reply(to: held, waitingFor: "the held REGISTRY after an enrolment")
            guard case .registryOK(let ok) = answer else { throw .fail("the held REGISTRY was answered \(describe(answer))") }
            let took = Clocks.monotonicMilliseconds() - sent
            guard !ok.entries.isEmpty else { return "empty after \(waited) ms of 700; the store answered the next one at once, empty: it does not hold (a MAY)" }
            // Other clients' changes may come first, and answer the held request before this
            // case's enrolment: then it is waited for from where they end.
            var seen = ok.entries
            var next = ok
            for _ in 0..<5 where !seen.contains(where: { $0.credential == device.credential && $0.state == .enrolled }) {
                let (more, end) = next.hasMore ? try readAll(session, from: next.cursor) : ([], next.cursor)
                seen += more
                guard !seen.contains(where: { $0.credential == device.credential }) else { break }
                next = try page(session, cursor: end, waitMs: 5_000, "REGISTRY held again after other clients' changes")
                seen += next.entries
            }
            try Expect.that(seen.contains { $0.credential == device.credential && $0.state == .enrolled },
                            "the held REGISTRY and those after it brought \(seen.count) entries, none of them the new enrolment")
            return "empty after \(waited) ms of 700; a held request answered with the enrolment \(took) ms after it was sent"
        },

        ConformanceCase("store.registry-held-inflight", clause: "4.16-9", "a held REGISTRY counts against max_inflight") { ctx throws(CaseStop) in
            let session = try gateway(ctx, maxInflight: 1)
            // A change by another client may answer the held request before the second
            // arrives; then the case tries again.
            for _ in 0..<3 {
                let (_, end) = try readAll(session)
                let held = try session.send(.registry(RegistryRequest(cursor: end, waitMs: 3_000)))
                let second = try session.send(.registry(RegistryRequest(cursor: end)))
                let answers = try session.answers(to: [held, second], "a held REGISTRY and a second one")
                guard case .registryOK(let first)? = answers[held] else {
                    throw .fail("the held REGISTRY was answered \(answers[held].map(describe) ?? "nothing")")
                }
                if case .error(let error)? = answers[second], error.status == .busy {
                    _ = try page(session, cursor: end, "REGISTRY once the held one was answered")
                    return "max_inflight 1: a second REGISTRY during the hold → BUSY; once answered, REGISTRY_OK"
                }
                guard !first.entries.isEmpty else {
                    throw .fail("a second REGISTRY while one was held got \(answers[second].map(describe) ?? "nothing"), expected ERROR BUSY")
                }
            }
            throw .skip("the registry changed during each of three holds (other clients enroll devices)")
        },
    ]
}
