import Foundation
@testable import PushStoreLogic
@testable import PushStoreSQLite
import Testing
import PushSecurity
import PushWire
@testable import PushStore

/// The store's logic over a real SQLite file, without sockets.
final class StoreFixture {
    let directory: URL
    let writer: SQLitePayloadWriter
    let reader: SQLitePayloadReader
    let reads: SQLiteStoreReads
    let logic: StoreLogic
    let serverKey = SecretKey(bytes: Array(repeating: 1, count: 32))!
    let providerKey = SecretKey(bytes: Array(repeating: 2, count: 32))!
    var now: UInt64 = 1_700_000_000_000

    /// The users are checked before every request unless told otherwise (`usersRecheckMs`
    /// 0): the tests change them from another connection and expect the next request to see it.
    /// `shared`: the process's limits, for a test that sets them up beforehand.
    init(settings: StoreSettings = StoreSettings(), usersRecheckMs: UInt64 = 0, shared: StoreProcessState? = nil) throws {
        var settings = settings
        settings.usersRecheckMs = usersRecheckMs
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("store-logic-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent(SQLitePayloadDatabase.fileName).path
        writer = try SQLitePayloadWriter(path: path)
        reader = try SQLitePayloadReader(path: path)
        var clockNow: () -> UInt64 = { 0 }
        logic = StoreLogic(settings: settings, serverKey: serverKey, providerKey: providerKey, clock: { clockNow() }, shared: shared)
        reads = try SQLiteStoreReads(reader: reader, recheckMs: settings.usersRecheckMs, clock: { clockNow() })
        clockNow = { [unowned self] in self.now }
        _ = try writer.addUser("alice", passwordHash: try PasswordHash.make(password: Array("pw-alice".utf8), iterations: 1000).encoded, nowMs: now)
        _ = try writer.addUser("bob", passwordHash: try PasswordHash.make(password: Array("pw-bob".utf8), iterations: 1000).encoded, nowMs: now)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    func session(_ role: PeerRole) -> StoreSession {
        StoreSession(peerAddress: "127.0.0.1", role: role)
    }

    /// Carries an action out the way the server does, synchronously; nil for a REGISTRY
    /// the server would hold.
    func perform(_ action: StoreAction, session: StoreSession) throws -> Message? {
        switch action {
        case .reply(let message): return message
        case .replay(let sent, _): return .sendOK(sent)
        case .commit(let operation, let reply):
            let outcomes = try writer.commit([operation])
            if case .stored(let sequence, _) = outcomes[0] {
                switch reply {
                case .storeOK(let stored): reads.stored(stored.id, sequence: sequence)
                case .sendOK(let sent, _, _, _): reads.stored(sent.id, sequence: sequence)
                default: break
                }
            }
            if case .sendOK(_, _, _, let key?) = reply { logic.sendCommitted(key) }
            return reply.message(for: outcomes[0])
        case .read(let wanted, let pending):
            return try perform(logic.resume(pending, with: read(wanted), session: session), session: session)
        case .verifyPassword(let login, let hash):
            let matched = hash.flatMap(PasswordHash.init(encoded:))?.verify(password: login.password) ?? false
            return try perform(logic.passwordChecked(login, matched: matched, session: session), session: session)
        case .loginDecided(let result):
            // As the server: a LOGIN's key is committed before LOGIN_OK ([4.6-5]).
            if let change = result.keyChange, case .loginOK(let reply) = result.reply {
                return CommittedReply.loginOK(reply).message(for: try writer.commit([.deviceKey(change)])[0])
            }
            return result.reply
        case .hold:
            return nil
        }
    }

    func read(_ wanted: StoreReads) -> Result<StoreReadResult, StoreBackendError> {
        do {
            return .success(try reads.read(wanted))
        } catch {
            return .failure(StoreBackendError(error))
        }
    }

    /// What the logic decides for `message` once its reads are done, not yet carried out.
    func begin(_ message: Message, session: StoreSession) -> StoreAction {
        settle(logic.handle(message, session: session), session: session)
    }

    /// Does the reads an action asks for, until it asks for something else.
    func settle(_ action: StoreAction, session: StoreSession) -> StoreAction {
        guard case .read(let wanted, let pending) = action else { return action }
        return settle(logic.resume(pending, with: read(wanted), session: session), session: session)
    }

    /// The end of a LOGIN whose password check (begun by `begin`) came out as `passwordMatched`.
    func finishLogin(_ login: Login, passwordMatched: Bool, session: StoreSession) -> LoginResult {
        let action = settle(logic.passwordChecked(login, matched: passwordMatched, session: session), session: session)
        guard case .loginDecided(let result) = action else {
            return LoginResult(reply: .error(ErrorReply(status: .internalError, message: "\(action)")), refusal: nil)
        }
        return result
    }

    /// The stored payload with this ID as the store reads it.
    func locate(_ id: PayloadID, withBody: Bool = true) throws -> StoredPayload? {
        try reads.payload(id, withBody: withBody)
    }

    /// The registry as `securepush device` changes it: another connection, as from another process.
    func registry() throws -> RegistryAdministration {
        try RegistryAdministration(databasePath: directory.appendingPathComponent(SQLitePayloadDatabase.fileName).path)
    }

    /// Enrolls `device` for `user` (revoking its previous registration), issued now.
    @discardableResult
    func enroll(_ device: String, user: String = "alice", tags: [String] = [], lifetimeMs: UInt64 = 86_400_000 * 365) throws -> RegistrationRecord {
        let signer = CredentialSigner(serverKey: serverKey, purpose: CredentialSigner.registrationPurpose)
        return try registry().enroll(user: user, deviceID: device, tags: tags, lifetimeMs: lifetimeMs, nowMs: now, signer: signer).registration
    }

    func revoke(_ device: String) throws {
        #expect(try registry().revoke(deviceID: device, nowMs: now) != nil)
    }

    func send(_ message: Message, on session: StoreSession) throws -> Message? {
        try perform(logic.handle(message, session: session), session: session)
    }

    /// A token from LOGIN, the device enrolled for the user first unless it is already; by
    /// default alice's "phone", or another user's "NAME-phone".
    func token(user: String = "alice", password: String? = nil, device: String? = nil) throws -> [UInt8] {
        let device = device ?? (user == "alice" ? "phone" : "\(user)-phone")
        if try registry().enrolled(deviceID: device)?.user != user { try enroll(device, user: user) }
        let reply = try send(.login(Login(user: user, password: Array((password ?? "pw-\(user)").utf8), deviceID: device)), on: session(.device))
        guard case .loginOK(let ok)? = reply else { throw StoreTestError.unexpected(reply) }
        return ok.token
    }

    func store(_ text: String, for user: String = "alice", ttl: UInt32 = 60, readLimit: UInt32 = 0) throws -> PayloadID {
        let reply = try send(.store(StoreRequest(user: user, payload: Array(text.utf8), ttlSeconds: ttl, readLimit: readLimit)), on: session(.provider))
        guard case .storeOK(let ok)? = reply else { throw StoreTestError.unexpected(reply) }
        return ok.id
    }
}

enum StoreTestError: Error { case unexpected(Message?) }

/// A reader whose table of stored IDs cannot be read.
final class UnreadableIDs: PayloadReader {
    struct Failure: Error {}
    func payload(sequence: UInt64, withBody: Bool) throws -> StoredPayload? { nil }
    func allIDs() throws -> [(PayloadID, UInt64)] { throw Failure() }
    func unread(userID: UInt64, _ query: UnreadQuery) throws -> UnreadPage {
        UnreadPage(ids: [], cursor: query.cursor, hasMore: false)
    }
    func audienceLists(sequence: UInt64, deviceID: String) throws -> Bool { false }
    func enrolledDevices(userID: UInt64) throws -> [UserDevice] { [] }
    func user(named name: String) throws -> UserRecord? { nil }
    func usersRevision() throws -> UInt64 { 0 }
    func registrySequence() throws -> UInt64 { 0 }
    func enrolledDevice(_ deviceID: String) throws -> EnrolledDevice? { nil }
    func registryChanges(after cursor: UInt64, limit: Int, maxBytes: Int) throws -> RegistryPage {
        RegistryPage(entries: [], cursor: cursor, hasMore: false)
    }
    func registryChangeCounts(after cursor: UInt64) throws -> RegistryChangeCounts { RegistryChangeCounts() }
    func pushOutcome(sequence: UInt64) throws -> PushOutcome { .none }
    func waitingPushes(after cursor: UInt64, limit: Int, nowMs: UInt64) throws -> [OutboxEntry] { [] }
    func idempotencyRecord(_ key: IdempotencyKey) throws -> IdempotencyRecord? { nil }
}

func status(of message: Message?) -> Status? {
    if case .error(let error)? = message { return error.status }
    return message == nil ? nil : .ok
}

@Suite("Store logic")
struct StoreLogicTests {
    @Test("[4.7-1] [4.10-1] STORE, FETCH, ACK with a read limit of 1, then GONE and erased")
    func burnAfterRead() throws {
        let store = try StoreFixture()
        let id = try store.store("meet at noon", readLimit: 1)
        let token = try store.token()
        let device = store.session(.device)
        guard case .fetchOK(let fetched)? = try store.send(.fetch(Fetch(id: id, token: token)), on: device) else {
            Issue.record("FETCH failed"); return
        }
        #expect(String(decoding: fetched.payload, as: UTF8.self) == "meet at noon")
        #expect(try store.send(.ack(Ack(id: id, token: token)), on: device) == .ackOK(AckOK(id: id)))
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: token)), on: device)) == .gone)
        #expect(try store.locate(id)?.body == [], "the bytes are erased")
    }

    @Test("[4.8-1] each FETCH failure has its own status")
    func fetchFailures() throws {
        let store = try StoreFixture()
        let id = try store.store("for alice")
        let device = store.session(.device)
        let aliceToken = try store.token()
        let bobToken = try store.token(user: "bob")
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: nil)), on: device)) == .authRequired)
        var forged = aliceToken
        forged[forged.count - 1] ^= 1
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: forged)), on: device)) == .badToken)
        #expect(status(of: try store.send(.fetch(Fetch(id: PayloadID.random(), token: aliceToken)), on: device)) == .notFound)
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: bobToken)), on: device)) == .forbidden)
        store.now += 3_600_000
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: aliceToken)), on: device)) == .tokenExpired)
        let fresh = try store.token()
        store.now += 60_000 * 60 * 24
        let late = try store.token()
        _ = fresh
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: late)), on: device)) == .gone, "past its TTL")
    }

    @Test("[4.11-1] a recalled payload is GONE; [4.11-2] recalling twice succeeds, an unknown id is NOT_FOUND")
    func recall() throws {
        let store = try StoreFixture()
        let id = try store.store("oops")
        let provider = store.session(.provider)
        #expect(try store.send(.recall(Recall(id: id)), on: provider) == .recallOK(RecallOK(id: id)))
        #expect(try store.send(.recall(Recall(id: id)), on: provider) == .recallOK(RecallOK(id: id)))
        #expect(status(of: try store.send(.recall(Recall(id: PayloadID.random())), on: provider)) == .notFound)
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: try store.token())), on: store.session(.device))) == .gone)
    }

    @Test("[4.12-1] STATUS moves from stored to fetched to gone")
    func statusStates() throws {
        let store = try StoreFixture()
        let id = try store.store("x")
        let provider = store.session(.provider)
        func state() throws -> PayloadState? {
            guard case .statusOK(let ok)? = try store.send(.status(StatusRequest(id: id)), on: provider) else { return nil }
            return ok.state
        }
        #expect(try state() == .stored)
        _ = try store.send(.fetch(Fetch(id: id, token: try store.token())), on: store.session(.device))
        #expect(try state() == .fetched)
        store.now += 61_000
        #expect(try state() == .gone)
        #expect(status(of: try store.send(.status(StatusRequest(id: PayloadID.random())), on: provider)) == .notFound)
    }

    @Test("[4.9-1] [4.9-5] SYNC pages through unread ids per device, newest first")
    func sync() throws {
        let store = try StoreFixture()
        let ids = try (0..<5).map { try store.store("m\($0)") }
        _ = try store.store("for bob", for: "bob")
        let phone = try store.token(device: "phone")
        let tablet = try store.token(device: "tablet")
        let device = store.session(.device)
        _ = try store.send(.ack(Ack(id: ids[1], token: phone)), on: device)
        guard case .syncOK(let first)? = try store.send(.sync(Sync(token: phone, limit: 2)), on: device) else { Issue.record("sync"); return }
        #expect(first.ids == [ids[4], ids[3]] && first.hasMore && first.olderCount == 2)
        guard case .syncOK(let second)? = try store.send(.sync(Sync(token: phone, cursor: first.cursor, limit: 2)), on: device) else { return }
        #expect(second.ids == [ids[2], ids[0]] && !second.hasMore && second.olderCount == 0)
        guard case .syncOK(let other)? = try store.send(.sync(Sync(token: tablet)), on: device) else { return }
        #expect(other.ids == ids.reversed(), "another device still sees what the phone acknowledged")
        #expect(status(of: try store.send(.sync(Sync(token: nil)), on: device)) == .authRequired)
    }

    @Test("[4.7-3] STORE refuses an unknown user, an oversized payload and a zero TTL")
    func storeRefusals() throws {
        var settings = StoreSettings()
        settings.maxPayloadBytes = 10
        let store = try StoreFixture(settings: settings)
        let provider = store.session(.provider)
        #expect(status(of: try store.send(.store(StoreRequest(user: "carol", payload: [1])), on: provider)) == .unknownUser)
        #expect(status(of: try store.send(.store(StoreRequest(user: "alice", payload: Array(repeating: 0, count: 11))), on: provider)) == .tooLarge)
        #expect(status(of: try store.send(.store(StoreRequest(user: "alice", payload: [1], ttlSeconds: 0)), on: provider)) == .badRequest)
    }

    @Test("[4.2-2] a provider and a gateway need a credential; [4.2-4] a forged one is refused; [7.1-5] a replayed one too; [4.2-3] devices need none")
    func admission() throws {
        let store = try StoreFixture()
        func status(_ hello: Hello) -> Status? {
            if case .refuse(let status, _, _) = store.logic.admit(hello) { return status }
            return nil
        }
        let providers = HelloCredential.provider(store.providerKey)
        #expect(status(Hello(role: .provider)) == .badRequest)
        #expect(status(Hello(role: .gateway)) == .badRequest)
        let forged = HelloCredential.provider(store.serverKey).make(for: .store, nowMs: store.now)
        #expect(status(Hello(role: .provider, credential: forged)) == .badCredentials)
        let stale = providers.make(for: .store, nowMs: store.now - 301_000)
        #expect(status(Hello(role: .provider, credential: stale)) == .badCredentials, "[7.1-3]")
        let forTheGateway = providers.make(for: .gateway, nowMs: store.now)
        #expect(status(Hello(role: .provider, credential: forTheGateway)) == .badCredentials, "[7.1-4]")
        let good = providers.make(for: .store, nowMs: store.now)
        #expect(store.logic.admit(Hello(role: .provider, credential: good)) == .admit)
        #expect(status(Hello(role: .provider, credential: good)) == .badCredentials, "[7.1-5] the same credential again")
        let gateway = HelloCredential.gateway(store.serverKey).make(for: .store, nowMs: store.now)
        #expect(status(Hello(role: .provider, credential: gateway)) == .badCredentials, "a gateway's credential is no provider's")
        #expect(store.logic.admit(Hello(role: .gateway, credential: gateway)) == .admit)
        #expect(store.logic.admit(Hello(role: .device)) == .admit)
        #expect(store.logic.admit(Hello(role: .device, credential: [1, 2, 3])) == .admit)
    }

    @Test("[4.6-2] unknown user and wrong password look alike; [4.6-3] repeated failures are rate limited")
    func loginFailures() throws {
        let store = try StoreFixture()
        try store.enroll("d")
        let device = store.session(.device)
        let unknown = try store.send(.login(Login(user: "mallory", password: Array("x".utf8), deviceID: "d")), on: device)
        let wrong = try store.send(.login(Login(user: "alice", password: Array("x".utf8), deviceID: "d")), on: device)
        #expect(unknown == wrong)
        #expect(status(of: wrong) == .badCredentials)
        for _ in 0..<2 { _ = try store.send(.login(Login(user: "alice", password: [], deviceID: "d")), on: device) }
        #expect(status(of: try store.send(.login(Login(user: "alice", password: Array("pw-alice".utf8), deviceID: "d")), on: device)) == .rateLimited)
        store.now += 1_000
        #expect(status(of: try store.send(.login(Login(user: "alice", password: Array("pw-alice".utf8), deviceID: "d")), on: device)) == .ok)
    }

    @Test("the store's reads refuse to start when the stored IDs cannot be read, rather than answer NOT_FOUND for each")
    func unreadableIDs() {
        #expect(throws: UnreadableIDs.Failure.self) {
            try SQLiteStoreReads(reader: UnreadableIDs(), recheckMs: 0, clock: { 0 })
        }
    }

    @Test("[4.6-3] idle login limits are forgotten, so the limiter tables shrink")
    func limiterTablesShrink() throws {
        let store = try StoreFixture()
        for index in 0..<10 {
            let session = StoreSession(peerAddress: "10.0.0.\(index)", role: .device)
            _ = try store.send(.login(Login(user: "user\(index)", password: Array("x".utf8), deviceID: "d")), on: session)
        }
        #expect(store.logic.loginFailureKeysTracked == 20, "ten (user, address) pairs and ten address budgets")
        store.logic.pruneLimiters()
        #expect(store.logic.loginFailureKeysTracked == 20, "still remembered")
        store.now += LoginThrottle.pairMemoryMs
        store.logic.pruneLimiters()
        #expect(store.logic.loginFailureKeysTracked == 0)
    }

    @Test("[4.6-3] a wall clock stepped back ends a login wait instead of stretching it or trapping")
    func limiterClockStepsBack() throws {
        let store = try StoreFixture()
        try store.enroll("d")
        let device = store.session(.device)
        for _ in 0..<8 { _ = try store.send(.login(Login(user: "alice", password: [], deviceID: "d")), on: device) }
        #expect(status(of: try store.send(.login(Login(user: "alice", password: Array("pw-alice".utf8), deviceID: "d")), on: device)) == .rateLimited)
        store.now -= 3_600_000
        store.logic.pruneLimiters()
        #expect(status(of: try store.send(.login(Login(user: "alice", password: Array("pw-alice".utf8), deviceID: "d")), on: device)) == .ok)
    }

    @Test("[4.10-2] ACK is idempotent and counts a device once")
    func ackIdempotent() throws {
        let store = try StoreFixture()
        let id = try store.store("twice", readLimit: 2)
        let phone = try store.token(device: "phone"), tablet = try store.token(device: "tablet")
        let device = store.session(.device)
        for _ in 0..<3 { #expect(try store.send(.ack(Ack(id: id, token: phone)), on: device) == .ackOK(AckOK(id: id))) }
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: phone)), on: device)) == .ok)
        _ = try store.send(.ack(Ack(id: id, token: tablet)), on: device)
        #expect(status(of: try store.send(.fetch(Fetch(id: id, token: phone)), on: device)) == .gone)
        #expect(status(of: try store.send(.ack(Ack(id: id, token: try store.token(user: "bob"))), on: device)) == .forbidden)
    }

    @Test("the sweeper empties expired payloads")
    func sweep() throws {
        let store = try StoreFixture()
        let id = try store.store("short", ttl: 1)
        #expect(try store.writer.sweepExpired(nowMs: store.now + 2_000) == 1)
        #expect(try store.locate(id)?.life == .expired)
        #expect(try store.locate(id)?.body == [])
        #expect(try store.writer.sweepExpired(nowMs: store.now + 2_000 + PayloadLife.tombstoneRetentionMs) == 0)
        #expect(status(of: try store.send(.recall(Recall(id: id)), on: store.session(.provider))) == .notFound, "forgotten after retention")
        #expect(try store.locate(id) == nil)
    }
}
