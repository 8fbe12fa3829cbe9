import Foundation
import PushEventLoop
@testable import PushStore
import PushStoreLogic
import PushTestSupport
import PushWire
import Testing

/// The HTTP provider API's sealed payloads over real sockets, against a store in this
/// process, on each backend: the keys route (SPEC.md 4.18) and `POST /v1/messages` with
/// `sealed` or `"seal": "devices"` (4.19). The sealed payloads are built without
/// cryptography: the store checks their structure and never opens them.
@Suite("HTTP provider API, sealed payloads, over sockets", .ownThread, .serialized)
struct SealedHTTPAPITests {
    /// RFC 7748 6.1's two X25519 public keys: keys a device could hold, none of small order.
    static let phoneKey = hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
    static let tabletKey = hex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")

    static func hex(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            bytes.append(UInt8(text[index..<next], radix: 16) ?? 0)
            index = next
        }
        return bytes
    }

    /// A store on `backend` with its HTTP API; the port and a token `scopes` allow.
    struct Fixture {
        let store: RunningStore
        let port: Int

        init(_ backend: Backend) throws {
            // SENDs wait in the outbox: no gateway is needed to answer them.
            store = try RunningStore(backend) {
                $0.settings.forwardsPushes = true
                $0.http = StoreHTTPConfiguration(host: "127.0.0.1", port: 0)
            }
            port = try #require(store.service.onLoop { $0.httpPort } ?? nil)
        }

        func token(_ provider: String = "billing", scopes: APITokenScopes = .all) throws -> String {
            try StoreDatabase(store.deployment.deployment).apiTokens()
                .create(provider: provider, scopes: scopes, nowMs: UInt64(Date().timeIntervalSince1970 * 1000)).text
        }

        /// `device` of `user` enrolled and logged in with `key`: LOGIN_OK's key id.
        func login(_ user: String = "alice", device: String, key: [UInt8]) throws -> KeyID {
            try store.deployment.enrolledRegistration(device, user: user)
            let login = Login(user: user, password: Array("\(user)-pw".utf8), deviceID: device,
                              deviceKey: DevicePublicKey(suite: .x25519, bytes: key))
            guard case .loginOK(let ok) = try store.device().request(.login(login)), let keyID = ok.keyID else {
                throw ServiceError.failed("LOGIN of \(device) with a key refused, or no key id")
            }
            return keyID
        }

        func keys(_ path: String, token: String, headers: [(String, String)] = [], on http: HTTPTestConnection? = nil) throws -> HTTPTestResponse {
            try (http ?? HTTPTestConnection(port: port)).request("GET", path, headers: [("Authorization", "Bearer \(token)")] + headers)
        }

        func post(_ json: String, token: String) throws -> HTTPTestResponse {
            try HTTPTestConnection(port: port).post("/v1/messages", json: json, token: token)
        }
    }

    /// One x25519 stanza for `keyID`, a fresh seal nonce: a payload the store takes.
    static func sealed(to keyID: KeyID) -> [UInt8] {
        SealedPayload(sealNonce: (0..<16).map { _ in UInt8.random(in: 0...255) },
                      stanzas: [SealedPayload.Stanza(suite: .x25519, keyID: keyID, encapsulatedKey: Array(repeating: 1, count: 32),
                                                     wrappedKey: Array(repeating: 2, count: 48))],
                      body: Array(repeating: 3, count: 40)).bytes
    }

    @Test("[4.18-1] [4.18-3] GET /v1/recipients/alice/keys: 200 with each keyed device in device id order, key ids as LOGIN_OK gave them, ETag the cursor; 304 for it; a re-key changes it",
          arguments: Backend.available)
    func keysRoute(_ backend: Backend) throws {
        let fixture = try Fixture(backend)
        let token = try fixture.token()
        let tabletID = try fixture.login(device: "tablet", key: Self.tabletKey)
        let phoneID = try fixture.login(device: "phone", key: Self.phoneKey)
        _ = try fixture.store.login("alice", device: "watch")  // no key: not listed
        let http = try HTTPTestConnection(port: fixture.port)
        let first = try fixture.keys("/v1/recipients/alice/keys", token: token, on: http)
        #expect(first.status == 200, "\(first.text)")
        let body = try first.json()
        #expect(body["recipient"] as? String == "alice")
        let cursor = try #require(body["cursor"] as? Int)
        #expect(cursor > 0)
        #expect(first.headers["etag"] == "\"\(cursor)\"")
        let keys = try #require(body["keys"] as? [[String: String]])
        #expect(keys == [
            ["device": "phone", "suite": "x25519", "key_id": phoneID.description, "public_key": Data(Self.phoneKey).base64EncodedString()],
            ["device": "tablet", "suite": "x25519", "key_id": tabletID.description, "public_key": Data(Self.tabletKey).base64EncodedString()],
        ])

        // The same cursor: 304, no body, and the connection goes on.
        let same = try fixture.keys("/v1/recipients/alice/keys", token: token, headers: [("If-None-Match", "\"\(cursor)\"")], on: http)
        #expect(same.status == 304 && same.body.isEmpty && same.headers["etag"] == "\"\(cursor)\"", "\(same.status) \(same.text)")
        #expect(try fixture.keys("/v1/recipients/alice/keys", token: token, on: http).status == 200, "keep-alive after a 304")

        // The phone's new key moves the cursor: the old tag no longer matches.
        _ = try fixture.login(device: "phone", key: Self.tabletKey)
        let after = try fixture.keys("/v1/recipients/alice/keys", token: token, headers: [("If-None-Match", "\"\(cursor)\"")])
        #expect(after.status == 200, "\(after.text)")
        #expect(after.headers["etag"] != "\"\(cursor)\"")
        #expect(try (try after.json()["keys"] as? [[String: String]])?.first?["public_key"] == Data(Self.tabletKey).base64EncodedString())

        // A user none of whose devices has a key: 200 with no keys.
        let bob = try fixture.keys("/v1/recipients/bob/keys", token: token)
        #expect(try bob.status == 200 && (try bob.json()["keys"] as? [Any])?.isEmpty == true, "\(bob.text)")
    }

    @Test("[4.18-1] [3.3-8] the keys of an unknown recipient are 404 UNKNOWN_USER; a percent-encoded name is the user's; a control character in it 400",
          arguments: Backend.available)
    func keysOfWhom(_ backend: Backend) throws {
        let fixture = try Fixture(backend)
        let token = try fixture.token()
        try fixture.store.deployment.addUser("zo\u{EB}", password: "zoe-pw")
        let unknown = try fixture.keys("/v1/recipients/mallory/keys", token: token)
        #expect(unknown.status == 404 && unknown.headers["content-type"] == "application/problem+json", "\(unknown.text)")
        #expect(try unknown.json()["code"] as? String == "UNKNOWN_USER")
        #expect(try fixture.keys("/v1/recipients/zoe%CC%88/keys", token: token).status == 404, "NFD is another name ([3.3-9])")
        let zoe = try fixture.keys("/v1/recipients/zo%C3%AB/keys", token: token)
        #expect(try zoe.status == 200 && (try zoe.json()["recipient"] as? String) == "zo\u{EB}", "\(zoe.text)")
        let control = try fixture.keys("/v1/recipients/alice%00/keys", token: token)
        #expect(try control.status == 400 && (try control.json()["code"] as? String) == "BAD_REQUEST", "\(control.text)")
    }

    @Test("[4.18-4] the keys scope: a token without it (one made before it existed: send,status,recall) is 403; any provider's token with it reads any user's keys")
    func keysScope() throws {
        let fixture = try Fixture(.sqlite)
        let older = try fixture.token("older", scopes: [.send, .status, .recall])
        let refused = try fixture.keys("/v1/recipients/alice/keys", token: older)
        #expect(try refused.status == 403 && (try refused.json()["code"] as? String) == "FORBIDDEN", "\(refused.text)")
        let sendOnly = try fixture.token("sender", scopes: .send)
        #expect(try fixture.keys("/v1/recipients/alice/keys", token: sendOnly).status == 403)
        let keysOnly = try fixture.token("sealer", scopes: .keys)
        #expect(try fixture.keys("/v1/recipients/alice/keys", token: keysOnly).status == 200)
        #expect(try fixture.post(#"{"recipient":"alice","text":"x"}"#, token: keysOnly).status == 403, "keys grants no send")
        #expect(try fixture.keys("/v1/recipients/alice/keys", token: "sp_nonsense").status == 401)
    }

    @Test("[4.19-1] [4.19-2] [4.18-5] POST sealed: 201 with the recipient's key cursor, fetched as sealed by the device; the same payload again 409 CONFLICT; a malformed one 422 BAD_REQUEST, for an unknown user too",
          arguments: Backend.available)
    func postSealed(_ backend: Backend) throws {
        let fixture = try Fixture(backend)
        let token = try fixture.token()
        let keyID = try fixture.login(device: "phone", key: Self.phoneKey)
        let cursor = try #require(try fixture.keys("/v1/recipients/alice/keys", token: token).json()["cursor"] as? Int)
        let sealed = Self.sealed(to: keyID)
        let body = #"{"recipient":"alice","sealed":"\#(Data(sealed).base64EncodedString())","push":{"alert":true}}"#
        let created = try fixture.post(body, token: token)
        #expect(created.status == 201, "\(created.text)")
        let answer = try created.json()
        #expect(answer["cursor"] as? Int == cursor, "\(created.text)")
        let id = try #require((answer["id"] as? String).flatMap(PayloadID.init(hex:)))

        let device = try fixture.store.device()
        guard case .loginOK(let login) = try device.request(.login(Login(user: "alice", password: Array("alice-pw".utf8), deviceID: "phone",
                                                                       deviceKey: DevicePublicKey(suite: .x25519, bytes: Self.phoneKey)))),
              case .fetchOK(let fetched) = try device.request(.fetch(Fetch(id: id, token: login.token))) else {
            Issue.record("alice's phone could not fetch the sealed payload"); return
        }
        #expect(fetched.sealed && fetched.payload == sealed, "the device view of a payload with its one stanza is the payload")

        let again = try fixture.post(body, token: token)
        #expect(try again.status == 409 && (try again.json()["code"] as? String) == "CONFLICT", "\(again.text)")

        for recipient in ["alice", "mallory"] {
            let malformed = try fixture.post(#"{"recipient":"\#(recipient)","sealed":"AAEC"}"#, token: token)
            #expect(try malformed.status == 422 && (try malformed.json()["code"] as? String) == "BAD_REQUEST", "\(recipient): \(malformed.text)")
        }
        let unknownSuite = Array(sealed.prefix(17)) + [1, 9] + Array(sealed.dropFirst(19))
        let refused = try fixture.post(#"{"recipient":"alice","sealed":"\#(Data(unknownSuite).base64EncodedString())"}"#, token: token)
        #expect(refused.status == 422, "a stanza of suite 9: \(refused.text)")
    }

    @Test("[4.19-6] [4.18-5] POST with \"seal\": \"devices\": 201 with the cursor, fetched sealed; a recipient with no keyed device 422 NO_DEVICE_KEYS",
          arguments: Backend.available)
    func postSealOnArrival(_ backend: Backend) throws {
        let fixture = try Fixture(backend)
        let token = try fixture.token()
        let keyID = try fixture.login(device: "phone", key: Self.phoneKey)
        let created = try fixture.post(#"{"recipient":"alice","text":"your code is 1237","seal":"devices"}"#, token: token)
        #expect(created.status == 201, "\(created.text)")
        #expect(try created.json()["cursor"] as? Int != nil, "\(created.text)")
        let id = try #require((try created.json()["id"] as? String).flatMap(PayloadID.init(hex:)))
        let device = try fixture.store.device()
        guard case .loginOK(let login) = try device.request(.login(Login(user: "alice", password: Array("alice-pw".utf8), deviceID: "phone",
                                                                       deviceKey: DevicePublicKey(suite: .x25519, bytes: Self.phoneKey)))),
              case .fetchOK(let fetched) = try device.request(.fetch(Fetch(id: id, token: login.token))) else {
            Issue.record("alice's phone could not fetch the payload sealed on arrival"); return
        }
        #expect(fetched.sealed && (try? SealedPayload(parsing: fetched.payload))?.stanzas.map(\.keyID) == [keyID])
        _ = try fixture.store.login("bob")
        let none = try fixture.post(#"{"recipient":"bob","text":"your code is 1238","seal":"devices"}"#, token: token)
        #expect(try none.status == 422 && (try none.json()["code"] as? String) == "NO_DEVICE_KEYS", "\(none.text)")
        let plain = try fixture.post(#"{"recipient":"bob","text":"your code is 1239"}"#, token: token)
        #expect(try plain.status == 201 && (try plain.json()["cursor"]) == nil, "a plain SEND has no cursor: \(plain.text)")
    }
}
