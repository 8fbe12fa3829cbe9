import Foundation
@testable import PushStoreLogic
import Testing
import PushSecurity
import PushWire
@testable import PushStore

extension StoreFixture {
    func login(_ user: String = "alice", device: String, password: String? = nil, from address: String = "127.0.0.1") throws -> Message? {
        try send(.login(Login(user: user, password: Array((password ?? "pw-\(user)").utf8), deviceID: device)),
                 on: StoreSession(peerAddress: address, role: .device))
    }

    func registry(cursor: UInt64 = 0, limit: UInt32 = RegistryRequest.defaultLimit, waitMs: UInt32 = 0,
                  on session: StoreSession? = nil) throws -> Message? {
        try send(.registry(RegistryRequest(cursor: cursor, limit: limit, waitMs: waitMs)), on: session ?? self.session(.gateway))
    }
}

func registryOK(_ message: Message?) -> RegistryOK? {
    if case .registryOK(let ok)? = message { return ok }
    return nil
}

@Suite("Store logic: the registry, LOGIN and tokens")
struct RegistryLogicTests {
    @Test("[4.6-4] LOGIN with the right password and a device id not enrolled for that user is BAD_CREDENTIALS, exactly as a wrong password")
    func loginNeedsAnEnrolledDevice() throws {
        let store = try StoreFixture()
        let wrongPassword = try store.login(device: "phone", password: "nope")
        #expect(status(of: wrongPassword) == .badCredentials)
        #expect(try store.login(device: "phone") == wrongPassword, "never enrolled")
        try store.enroll("bobs-phone", user: "bob")
        #expect(try store.login(device: "bobs-phone", from: "10.0.0.2") == wrongPassword, "enrolled, but for bob")
        try store.enroll("old", lifetimeMs: 1_000)
        store.now += 1_000
        #expect(try store.login(device: "old", from: "10.0.0.3") == wrongPassword, "enrolled, but expired")
        try store.enroll("phone")
        guard case .loginOK? = try store.login(device: "phone", from: "10.0.0.4") else { Issue.record("an enrolled device was refused"); return }
        try store.revoke("phone")
        #expect(try store.login(device: "phone", from: "10.0.0.5") == wrongPassword, "revoked")
    }

    @Test("[4.6-4] [8-10] an unenrolled device's LOGIN counts as a failure: the right password gives a guesser no sign")
    func unenrolledLoginsCountAsFailures() throws {
        let store = try StoreFixture()
        let result = { (login: Login) -> LoginResult in
            let session = store.session(.device)
            _ = store.begin(.login(login), session: session)
            return store.finishLogin(login, passwordMatched: true, session: session)
        }
        #expect(result(Login(user: "alice", password: Array("pw-alice".utf8), deviceID: "made-up")).refusal == .deviceNotEnrolled)
        for _ in 0..<2 { _ = try store.login(device: "made-up") }
        #expect(status(of: try store.login(device: "made-up")) == .rateLimited, "three failures, then the pair waits")
        try store.enroll("phone")
        #expect(status(of: try store.login(device: "phone", from: "10.9.9.9")) == .ok, "another address is not held back")
    }

    @Test("[7.3-3] times equal to the token's issued_at count as before: a user added and a device enrolled in the token's millisecond leave it valid")
    func equalTimesCountAsBefore() throws {
        let store = try StoreFixture()
        // alice was added at `now`; the phone is enrolled, and the token issued, at `now` too.
        let registration = try store.enroll("phone")
        #expect(registration.issuedAt == store.now)
        let token = try store.token()
        let claims = try FetchToken.open(token, signer: CredentialSigner(serverKey: store.serverKey, purpose: CredentialSigner.fetchTokenPurpose),
                                         nowMs: store.now)
        #expect(claims.issuedAt == store.now, "the same millisecond as the user and the registration")
        let id = try store.store("for alice")
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: token)), on: store.session(.device))) == .ok)
    }

    @Test("[7.3-3] a token stops working once its device is revoked or enrolled again, and a new LOGIN of the re-enrolled device works")
    func tokensEndWithTheRegistration() throws {
        let store = try StoreFixture()
        let id = try store.store("for alice")
        let device = store.session(.device)
        let first = try store.token()
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: first)), on: device)) == .ok)
        store.now += 1
        try store.enroll("phone")
        for request in [Message.fetch(Fetch(id: id, token: first)), .sync(Sync(token: first)), .ack(Ack(id: id, token: first))] {
            #expect(status(of: try store.send(request, on: device)) == .badToken, "\(request.type)")
        }
        let second = try store.token()
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: second)), on: device)) == .ok)
        try store.revoke("phone")
        #expect(status(of: try store.send(.sync(Sync(token: second)), on: device)) == .badToken)
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: try store.token(device: "tablet"))), on: device)) == .ok,
                "the user's other devices are untouched")
    }

    @Test("the registry is looked at with the users, at most once per usersRecheckMs: a revocation is seen once that much time has passed")
    func recheckInterval() throws {
        let store = try StoreFixture(usersRecheckMs: 1_000)
        let token = try store.token()
        let device = store.session(.device)
        #expect(status(of: try store.send(.sync(Sync(token: token)), on: device)) == .ok)
        try store.revoke("phone")
        store.now += 999
        #expect(status(of: try store.send(.sync(Sync(token: token)), on: device)) == .ok, "not looked for yet")
        store.now += 1
        #expect(status(of: try store.send(.sync(Sync(token: token)), on: device)) == .badToken)
    }

    @Test("[8-9] revoked tokens are reported, and do not count towards the BAD_TOKEN limit")
    func revokedTokensAreNotForgeries() throws {
        let store = try StoreFixture()
        var reported: [TokenRevocation] = []
        store.logic.onTokenRevoked = { reason, claims, _ in
            reported.append(reason)
            #expect(claims.deviceID == "phone")
        }
        let token = try store.token()
        try store.revoke("phone")
        let device = store.session(.device)
        for _ in 0..<(store.logic.settings.badTokensPerAddress + 5) {
            #expect(status(of: try store.send(.sync(Sync(token: token)), on: device)) == .badToken)
        }
        #expect(reported.count == store.logic.settings.badTokensPerAddress + 5 && Set(reported) == [.deviceNotEnrolled])
        try store.removeUser("alice")
        _ = try store.send(.sync(Sync(token: token)), on: device)
        #expect(reported.last == .userRemoved)
    }

    @Test("a registration issued ahead of the store's clock still yields a token that works")
    func registrationFromAFastClock() throws {
        let store = try StoreFixture()
        let id = try store.store("x")
        store.now += 60_000
        try store.enroll("phone")
        store.now -= 60_000
        let token = try store.token()
        let claims = try FetchToken.open(token, signer: CredentialSigner(serverKey: store.serverKey, purpose: CredentialSigner.fetchTokenPurpose),
                                         nowMs: store.now)
        #expect(claims.issuedAt == store.now + 60_000, "never dated before its registration")
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: token)), on: store.session(.device))) == .ok)
    }

    @Test("[4.16-1] [4.16-3] [4.16-5] REGISTRY lists changes after the cursor, oldest first, each entry in its latest state")
    func registryPages() throws {
        let store = try StoreFixture()
        let phone = try store.enroll("phone")
        let tablet = try store.enroll("tablet", user: "bob")
        let all = try #require(registryOK(try store.registry()))
        #expect(all.entries == [RegistryEntry(state: .enrolled, credential: phone.credential),
                                RegistryEntry(state: .enrolled, credential: tablet.credential)])
        #expect(all.cursor == 2 && !all.hasMore)
        try store.revoke("phone")
        let after = try #require(registryOK(try store.registry(cursor: all.cursor)))
        #expect(after.entries == [RegistryEntry(state: .revoked, credential: phone.credential)] && after.cursor == 3)
        let fromStart = try #require(registryOK(try store.registry()))
        #expect(fromStart.entries.map(\.state) == [.enrolled, .revoked], "phone is listed once, as revoked, after tablet")
        let none = try #require(registryOK(try store.registry(cursor: 3)))
        #expect(none.entries.isEmpty && none.cursor == 3 && !none.hasMore)
        let ahead = try #require(registryOK(try store.registry(cursor: 99)))
        #expect(ahead.cursor == 99, "the cursor never goes back")
    }

    @Test("[4.16-3] [4.9-2] cursors past Int64.max are past everything, not before it (SQLite integers are signed)")
    func hugeCursors() throws {
        let store = try StoreFixture()
        try store.enroll("phone")
        let id = try store.store("x")
        for cursor in [UInt64(Int64.max), UInt64(Int64.max) + 1, UInt64.max] {
            let page = try #require(registryOK(try store.registry(cursor: cursor)))
            #expect(page.entries.isEmpty && page.cursor == cursor && !page.hasMore, "REGISTRY from \(cursor)")
            // SYNC pages to older ids, below its cursor: from above every seq it lists them all.
            guard case .syncOK(let sync)? = try store.send(.sync(Sync(token: try store.token(), cursor: cursor)), on: store.session(.device))
            else { Issue.record("SYNC from \(cursor)"); continue }
            #expect(sync.ids == [id] && !sync.hasMore, "SYNC from \(cursor)")
        }
    }

    @Test("[4.16-4] a limit of 0 is 1 and one above 1000 is 1000; a reply stays within the frame but lists at least one entry")
    func registryLimits() throws {
        let store = try StoreFixture()
        for index in 0..<5 { try store.enroll("device-\(index)", tags: [String(repeating: "t", count: 64), String(repeating: "u", count: 64)]) }
        let one = try #require(registryOK(try store.registry(limit: 0)))
        #expect(one.entries.count == 1 && one.cursor == 1 && one.hasMore)
        let most = try #require(registryOK(try store.registry(limit: 5_000)))
        #expect(most.entries.count == 5 && !most.hasMore)
        let small = store.session(.gateway)
        small.maxFrame = FrameLimits.floor
        let page = try #require(registryOK(try store.registry(on: small)))
        #expect(page.entries.count == 4 && page.hasMore, "entries of \(page.entries.first?.encodedCount ?? 0) bytes")
        #expect(Message.registryOK(page).encoded(correlation: 1).count <= FrameLimits.floor)
        let rest = try #require(registryOK(try store.registry(cursor: page.cursor, on: small)))
        #expect(rest.entries.count == 1 && !rest.hasMore)
    }

    @Test("[4.16-8] with nothing after the cursor and wait_ms above 0 the request is held until a change follows it")
    func heldRegistry() throws {
        let store = try StoreFixture()
        try store.enroll("phone")
        let gateway = store.session(.gateway)
        let request = RegistryRequest(cursor: 1, waitMs: 10_000)
        guard case .hold(request) = store.begin(.registry(request), session: gateway) else { Issue.record("not held"); return }
        #expect(try store.reads.registryNotice(after: 0) == RegistryNotice(from: 0, to: 1, counts: RegistryChangeCounts(enrolled: 1, revoked: 0)))
        let heldReply = { store.logic.heldRegistryReply(store.read(store.logic.registryReads(request, session: gateway))) }
        #expect(heldReply() == nil)
        try store.revoke("phone")
        #expect(try store.reads.registryNotice(after: 1) == RegistryNotice(from: 1, to: 2, counts: RegistryChangeCounts(enrolled: 0, revoked: 1)))
        #expect(try store.reads.registryNotice(after: 2) == nil)
        guard case .registryOK(let ok)? = heldReply() else { Issue.record("no reply"); return }
        #expect(ok.entries.map(\.state) == [.revoked] && ok.cursor == 2)
        #expect(StoreLogic.emptyRegistryReply(request) == .registryOK(RegistryOK(entries: [], cursor: 1, hasMore: false)))
        #expect(store.begin(.registry(RegistryRequest(cursor: 1, waitMs: 10_000)), session: gateway).isReply, "a change follows: at once")
    }
}

extension StoreAction {
    var isReply: Bool {
        if case .reply = self { return true }
        return false
    }
}
