import Foundation
import PushEventLoop
@testable import PushStore
import PushSecurity
@testable import PushStoreLogic
import PushTestSupport
import PushWire
import Testing

/// Names are exact bytes on every path to the database ([3.3-8], [3.3-9]): a name is never
/// cut at a NUL on its way to SQLite or PostgreSQL, a control character in one is
/// BAD_REQUEST, and two spellings of one text are two users. Each case runs on both backends.
@Suite("Names as exact bytes, on every backend", .ownThread, .serialized)
struct IdentifierBytesTests {
    static let nfc = "zo\u{EB}"
    static let nfd = "zoe\u{308}"

    func unread(_ store: RunningStore, _ token: [UInt8]) throws -> [PayloadID] {
        let reply = try store.device().request(.sync(Sync(token: token)))
        guard case .syncOK(let page) = reply else { throw ServiceError.failed("SYNC refused: \(reply)") }
        return page.ids
    }

    @Test("[3.3-8] [4.7-3] [4.17-1] STORE and SEND to \"alice\\0bob\" or \"alice\\0\" are BAD_REQUEST, and alice's device can fetch nothing",
          arguments: Backend.available)
    func nulInRecipient(_ backend: Backend) throws {
        let store = try RunningStore(backend) { $0.settings.forwardsPushes = true }
        let alice = try store.login("alice")
        let provider = try store.provider()
        let device = try store.device()
        for name in ["alice\0bob", "alice\0"] {
            let requests: [Message] = [.store(StoreRequest(user: name, payload: Array("for alice?".utf8))),
                                       .send(SendRequest(user: name, payload: Array("for alice?".utf8)))]
            for request in requests {
                let reply = try provider.request(request)
                #expect(errorStatus(reply) == .badRequest, "\(request.type) to \(name.debugDescription): \(reply)")
                let id: PayloadID? = switch reply {
                case .storeOK(let ok): ok.id
                case .sendOK(let ok): ok.id
                default: nil
                }
                if let id {
                    let fetched = try device.request(.fetch(Fetch(id: id, token: alice)))
                    #expect(fetched.type != .fetchOK, "alice's device fetched what was sent to \(name.debugDescription)")
                }
            }
        }
        #expect(try unread(store, alice).isEmpty, "nothing was stored for alice")
        let login = try device.request(.login(Login(user: "alice", password: Array("alice-pw".utf8), deviceID: "phone\0")))
        #expect(errorStatus(login) == .badRequest, "a device id with a NUL: \(login)")
        // The connection is still good, and a well-formed request still works.
        _ = try store.store("for alice", via: provider)
        #expect(try unread(store, alice).count == 1)
    }

    @Test("[3.3-9] [3.3-2] zoë in NFC and in NFD are two users: each receives and reads only its own payloads",
          arguments: Backend.available)
    func normalizationFormsAreTwoUsers(_ backend: Backend) throws {
        let store = try RunningStore(backend) { $0.settings.forwardsPushes = true }
        try store.deployment.addUser(Self.nfc, password: "nfc-pw")
        try store.deployment.addUser(Self.nfd, password: "nfd-pw")
        // Enrolled and logged in first, so that what is sent next is for these devices.
        let nfcToken = try store.login(Self.nfc, password: "nfc-pw", device: "zoe-nfc-phone")
        let nfdToken = try store.login(Self.nfd, password: "nfd-pw", device: "zoe-nfd-phone")
        let provider = try store.provider()
        let forNFC = try store.store("for the NFC zoë", for: Self.nfc, via: provider)
        let forNFD = try store.store("for the NFD zoë", for: Self.nfd, via: provider)
        guard case .sendOK(let sent) = try provider.request(.send(SendRequest(user: Self.nfd, payload: [1]))) else {
            Issue.record("SEND to the NFD zoë refused"); return
        }
        #expect(try Set(unread(store, nfcToken)) == [forNFC])
        #expect(try Set(unread(store, nfdToken)) == [forNFD, sent.id])
        let device = try store.device()
        #expect(errorStatus(try device.request(.fetch(Fetch(id: forNFC, token: nfdToken)))) == .forbidden)
        #expect(errorStatus(try device.request(.fetch(Fetch(id: forNFD, token: nfcToken)))) == .forbidden)
        guard case .fetchOK(let fetched) = try device.request(.fetch(Fetch(id: forNFD, token: nfdToken))) else {
            Issue.record("the NFD zoë cannot read her own payload"); return
        }
        #expect(fetched.payload == Array("for the NFD zoë".utf8))
        // [4.17-2] a SEND's user target must be its recipient, byte for byte.
        let other = try provider.request(.send(SendRequest(user: Self.nfc, payload: [2], target: .user(Self.nfd))))
        #expect(errorStatus(other) == .badRequest, "\(other)")
    }

    @Test("[3.3-9] [4.7-3] with only the NFC zoë known, a STORE to the NFD spelling is UNKNOWN_USER, even after one to the NFC one",
          arguments: Backend.available)
    func otherSpellingIsUnknown(_ backend: Backend) throws {
        let store = try RunningStore(backend)
        try store.deployment.addUser(Self.nfc, password: "nfc-pw")
        let provider = try store.provider()
        _ = try store.store("for the NFC zoë", for: Self.nfc, via: provider)
        let reply = try provider.request(.store(StoreRequest(user: Self.nfd, payload: [1])))
        #expect(errorStatus(reply) == .unknownUser, "\(reply)")
    }

    @Test("[3.3-9] the store's caches keep the spellings apart: one group commit for both, and the user lookups between refreshes")
    func cachesCompareBytes() throws {
        // Users are rechecked only when due: the lookups below all come from the cache.
        let store = try StoreFixture(usersRecheckMs: 3_600_000)
        let hash = try PasswordHash.make(password: Array("pw".utf8), iterations: 1000).encoded
        #expect(try store.writer.addUser(Self.nfc, passwordHash: hash, nowMs: store.now))
        #expect(try store.writer.addUser(Self.nfd, passwordHash: hash, nowMs: store.now))
        let ids = [PayloadID.random(), PayloadID.random()]
        let batch = zip(ids, [Self.nfc, Self.nfd]).map { id, user in
            WriteOperation.store(NewPayload(id: id, user: user, body: Array(user.utf8), createdAt: store.now,
                                            expiresAt: store.now + 60_000, readLimit: 0, sender: "provider-key"))
        }
        let outcomes = try store.writer.commit(batch)
        let sequences = outcomes.compactMap { outcome -> UInt64? in
            if case .stored(let sequence, _) = outcome { return sequence }
            return nil
        }
        #expect(sequences.count == 2, "\(outcomes)")
        for (id, sequence) in zip(ids, sequences) { store.reads.stored(id, sequence: sequence) }
        let owners = try ids.map { try #require(try store.locate($0)).userID }
        let users = try [Self.nfc, Self.nfd].map { try #require(try store.reader.user(named: $0)).id }
        #expect(owners == users, "each payload belongs to the user of its own spelling")
        #expect(users[0] != users[1])
        let looked = try [Self.nfc, Self.nfd].map { name in try store.reads.read(StoreReads(user: name)).user?.id }
        #expect(looked == users, "the user directory answers each spelling with its own user")
    }

    @Test("[3.3-8] POST /v1/messages with {\"recipient\": \"alice\\u0000\"} is 422 naming the member, never 201",
          arguments: Backend.available)
    func httpRecipientWithNul(_ backend: Backend) throws {
        let store = try RunningStore(backend) {
            $0.settings.forwardsPushes = true
            $0.http = StoreHTTPConfiguration(host: "127.0.0.1", port: 0)
        }
        let alice = try store.login("alice")
        let token = try StoreDatabase(store.deployment.deployment).apiTokens().create(provider: "billing", nowMs: UInt64(Date().timeIntervalSince1970 * 1000)).text
        let port = try #require(store.service.onLoop { $0.httpPort } ?? nil)
        let refused: [(json: String, headers: [(String, String)], member: String)] = [
            (#"{"recipient":"alice\u0000","text":"for alice?"}"#, [], "recipient"),
            (#"{"recipient":"alice\u0000bob","text":"for alice?"}"#, [], "recipient"),
            (#"{"recipient":"alice","text":"x","push":{"tag":"team\n"}}"#, [], "push.tag"),
            (#"{"recipient":"alice","text":"x","push":{"device":"phone\u0085"}}"#, [], "push.device"),
            (#"{"recipient":"alice","text":"x","push":{"collapse_key":"otp\u007f"}}"#, [], "push.collapse_key"),
            (#"{"recipient":"alice","text":"x"}"#, [("Idempotency-Key", "key\t1")], "Idempotency-Key header"),
        ]
        for (json, headers, member) in refused {
            let answer = try HTTPTestConnection(port: port).post("/v1/messages", json: json, token: token, headers: headers)
            #expect(answer.status == 422, "\(json): \(answer.status) \(answer.text)")
            let body = try answer.json()
            #expect(body["code"] as? String == "BAD_REQUEST", "\(answer.text)")
            #expect((body["detail"] as? String)?.contains("\(member) contains a control character") == true, "\(answer.text)")
        }
        #expect(try unread(store, alice).isEmpty, "nothing was stored for alice")
        let accepted = try HTTPTestConnection(port: port).post("/v1/messages", json: #"{"recipient":"alice","text":"hi"}"#, token: token)
        #expect(accepted.status == 201, "\(accepted.text)")
    }
}
