import Foundation
@testable import PushStoreLogic
@testable import PushStoreSQLite
import Testing
import PushSecurity
import PushWire
@testable import PushStore

extension StoreFixture {
    var databasePath: String { directory.appendingPathComponent(SQLitePayloadDatabase.fileName).path }

    /// The users table as `securepush user` changes it: another connection, as from another process.
    func administration() throws -> UserAdministration {
        try UserAdministration(databasePath: databasePath)
    }

    func removeUser(_ name: String) throws {
        #expect(try administration().remove(name, clock: { self.now }) != nil)
    }

    func addUser(_ name: String, password: String) throws {
        let hash = try PasswordHash.make(password: Array(password.utf8), iterations: 1000).encoded
        #expect(try administration().add(name, passwordHash: hash, nowMs: now) != nil)
    }

    func count(_ sql: String) throws -> Int64? {
        try SQLiteConnection(path: databasePath).integer(sql)
    }
}

@Suite("User identity and revocation")
struct UserIdentityTests {
    @Test("removing a user revokes its tokens at once: FETCH, SYNC and ACK answer BAD_TOKEN, STORE UNKNOWN_USER")
    func removalRevokes() throws {
        let store = try StoreFixture()
        let id = try store.store("for alice")
        let token = try store.token()
        let device = store.session(.device)
        guard case .fetchOK? = try store.send(.fetch(Fetch(id: id, token: token)), on: device) else {
            Issue.record("FETCH before the removal failed"); return
        }
        try store.removeUser("alice")
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: token)), on: device)) == .badToken)
        #expect(status(of: try store.send(.sync(Sync(token: token)), on: device)) == .badToken)
        #expect(status(of: try store.send(.ack(Ack(id: id, token: token)), on: device)) == .badToken)
        #expect(status(of: try store.send(.store(StoreRequest(user: "alice", payload: [1])), on: store.session(.provider))) == .unknownUser)
        #expect(try store.token(user: "bob") != [], "other users are untouched")
    }

    @Test("the removed user's payloads and their receipts are deleted")
    func removalDeletes() throws {
        let store = try StoreFixture()
        let id = try store.store("for alice")
        _ = try store.store("also for alice")
        _ = try store.store("for bob", for: "bob")
        #expect(try store.send(.ack(Ack(id: id, token: try store.token())), on: store.session(.device)) == .ackOK(AckOK(id: id)))
        let removed = try #require(try store.administration().remove("alice", clock: { store.now }))
        #expect(removed.payloads == 2)
        #expect(try store.count("SELECT count(*) FROM payloads") == 1)
        #expect(try store.count("SELECT count(*) FROM receipts") == 0)
        #expect(try store.locate(id) == nil)
    }

    @Test("a name added again is a new user: no old payloads, the old token refused, a new token works")
    func readdedNameIsSomeoneElse() throws {
        let store = try StoreFixture()
        let old = try store.store("the first alice's secret")
        let oldToken = try store.token()
        try store.removeUser("alice")
        try store.addUser("alice", password: "second-alice")
        let device = store.session(.device)
        #expect(status(of: try store.send(.fetch(Fetch(id: old, token: oldToken)), on: device)) == .badToken)
        #expect(status(of: try store.send(.sync(Sync(token: oldToken)), on: device)) == .badToken)
        let newToken = try store.token(password: "second-alice")
        #expect(status(of: try store.send(.fetch(Fetch(id: old, token: newToken)), on: device)) == .notFound)
        guard case .syncOK(let page)? = try store.send(.sync(Sync(token: newToken)), on: device) else {
            Issue.record("SYNC with the new token failed"); return
        }
        #expect(page.ids.isEmpty)
        let fresh = try store.store("the second alice's")
        guard case .syncOK(let next)? = try store.send(.sync(Sync(token: newToken)), on: device) else {
            Issue.record("SYNC with the new token failed"); return
        }
        #expect(next.ids == [fresh])
        #expect(status(of: try store.send(.fetch(Fetch(id: fresh, token: oldToken)), on: device)) == .badToken)
        #expect(throws: StoreTestError.self, "the old password is not the new user's") { try store.token(password: "pw-alice") }
    }

    @Test("a token minted before the name's new holder was added is refused even with a valid MAC")
    func tokenDatedBeforeTheUser() throws {
        let store = try StoreFixture()
        let id = try store.store("x")
        try store.removeUser("alice")
        try store.addUser("alice", password: "p2")
        let signer = CredentialSigner(serverKey: store.serverKey, purpose: CredentialSigner.fetchTokenPurpose)
        // Inside the fence a removal sets: a store that had not yet seen the removal could issue this.
        let late = FetchToken(user: "alice", deviceID: "phone", issuedAt: store.now + 999, expiresAt: store.now + 60_000).signed(by: signer)
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: late)), on: store.session(.device))) == .badToken)
    }

    @Test("[7.3-3] a token for a name no user holds is BAD_TOKEN however recent: no registration of that user exists")
    func tokenOfNoUser() throws {
        let store = try StoreFixture()
        let id = try store.store("for alice")
        try store.addUser("carol", password: "c")
        try store.removeUser("carol")
        store.now += 1_000
        let signer = CredentialSigner(serverKey: store.serverKey, purpose: CredentialSigner.fetchTokenPurpose)
        let token = FetchToken(user: "nobody", deviceID: "d", issuedAt: store.now, expiresAt: store.now + 60_000).signed(by: signer)
        let device = store.session(.device)
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: token)), on: device)) == .badToken)
        #expect(status(of: try store.send(.fetch(Fetch(id: PayloadID.random(), token: token)), on: device)) == .badToken)
        #expect(status(of: try store.send(.ack(Ack(id: id, token: token)), on: device)) == .badToken)
        #expect(status(of: try store.send(.sync(Sync(token: token, cursor: 7)), on: device)) == .badToken)
    }

    @Test("a LOGIN whose password was checked against a removed user gets no token")
    func loginAcrossRemoval() throws {
        let store = try StoreFixture()
        let session = store.session(.device)
        let login = Login(user: "alice", password: Array("pw-alice".utf8), deviceID: "phone")
        guard case .verifyPassword(_, let hash) = store.begin(.login(login), session: session) else {
            Issue.record("LOGIN did not ask for a password check"); return
        }
        #expect(hash != nil)
        // The hash is being checked off the loop while the name changes hands.
        try store.removeUser("alice")
        try store.addUser("alice", password: "pw-alice")
        #expect(status(of: store.finishLogin(login, passwordMatched: true, session: session).reply) == .badCredentials)
        #expect(try store.token() != [], "a LOGIN checked against the new user succeeds")
    }

    @Test("identical LOGINs in flight, checked against different holders of the name, are all refused")
    func identicalLoginsAcrossRemoval() throws {
        let store = try StoreFixture()
        let session = store.session(.device)
        let login = Login(user: "alice", password: Array("same".utf8), deviceID: "phone")
        _ = store.begin(.login(login), session: session)
        try store.removeUser("alice")
        try store.addUser("alice", password: "same")
        _ = store.begin(.login(login), session: session)
        // Which of the two checks matched is not known here: neither may yield a token.
        #expect(status(of: store.finishLogin(login, passwordMatched: false, session: session).reply) == .badCredentials)
        #expect(status(of: store.finishLogin(login, passwordMatched: true, session: session).reply) == .badCredentials)
        #expect(try store.token(password: "same") != [], "once they are done, LOGIN works again")
    }

    @Test("a STORE committed after its user was removed is refused UNKNOWN_USER and leaves no row")
    func storeRacingRemoval() throws {
        let store = try StoreFixture()
        let action = store.logic.handle(.store(StoreRequest(user: "alice", payload: [1, 2, 3])), session: store.session(.provider))
        guard case .commit(let operation, let reply) = action else { Issue.record("STORE did not commit"); return }
        try store.removeUser("alice")
        let outcomes = try store.writer.commit([operation])
        #expect(outcomes == [.failed(.unknownUser)])
        #expect(status(of: reply.message(for: outcomes[0])) == .unknownUser)
        #expect(try store.count("SELECT count(*) FROM payloads") == 0)
    }

    @Test("a user added by another process is served by the next request")
    func additionSeenAtOnce() throws {
        let store = try StoreFixture()
        let provider = store.session(.provider)
        #expect(status(of: try store.send(.store(StoreRequest(user: "carol", payload: [1])), on: provider)) == .unknownUser)
        try store.addUser("carol", password: "c")
        #expect(status(of: try store.send(.store(StoreRequest(user: "carol", payload: [1])), on: provider)) == .ok)
    }

    @Test("revoked tokens are not counted as forged ones against the client's address ([8-9])")
    func revokedTokensAreNotForgeries() throws {
        var settings = StoreSettings()
        settings.badTokensPerAddress = 2
        let store = try StoreFixture(settings: settings)
        let id = try store.store("x")
        let token = try store.token()
        try store.removeUser("alice")
        for _ in 0..<5 {
            #expect(status(of: try store.send(.fetch(Fetch(id: id, token: token)), on: store.session(.device))) == .badToken)
        }
    }

    @Test("checked at most once per usersRecheckMs of the store's clock, a removal is seen once that much time has passed")
    func recheckInterval() throws {
        let store = try StoreFixture(usersRecheckMs: 1_000)
        let id = try store.store("x")
        let token = try store.token()
        let device = store.session(.device)
        guard case .fetchOK? = try store.send(.fetch(Fetch(id: id, token: token)), on: device) else {
            Issue.record("FETCH failed"); return
        }
        try store.removeUser("alice")
        store.now += 999
        // Still within the interval: the removal has not been looked for yet (its payload
        // row is gone, though, so the FETCH finds nothing).
        #expect(status(of: try store.send(.sync(Sync(token: token)), on: device)) == .ok)
        store.now += 1
        #expect(status(of: try store.send(.sync(Sync(token: token)), on: device)) == .badToken)
    }

    @Test("the users revision moves with the users table, not with payload writes")
    func usersRevision() throws {
        let store = try StoreFixture()
        let before = try store.reader.usersRevision()
        _ = try store.store("a payload")
        #expect(try store.reader.usersRevision() == before)
        try store.addUser("carol", password: "c")
        let added = try store.reader.usersRevision()
        #expect(added != before)
        try store.removeUser("carol")
        #expect(try store.reader.usersRevision() != added)
    }
}
