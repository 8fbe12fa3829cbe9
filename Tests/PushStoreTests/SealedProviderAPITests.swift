import Foundation
@testable import PushProviderAPI
import PushWire
import Testing

/// The HTTP provider API's parts of sealed payloads that need no sockets: the keys route and
/// its answer, and the members of `POST /v1/messages` that carry a sealed payload or ask for
/// one (SPEC.md 4.18, 4.19).
@Suite("HTTP provider API, sealed payloads, without sockets")
struct SealedProviderAPITests {
    func post(_ json: String) throws(ProviderAPIProblem) -> SendRequest {
        try MessagePost.decode(Array(json.utf8)).sendRequest(idempotencyKey: nil)
    }

    func problem(_ json: String) -> ProviderAPIProblem? {
        do {
            _ = try post(json)
            return nil
        } catch {
            return error
        }
    }

    func routeProblem(_ method: String, _ path: String) -> ProviderAPIProblem? {
        do {
            _ = try ProviderAPIRoute.of(method: method, path: path)
            return nil
        } catch {
            return error
        }
    }

    /// A sealed payload's bytes, made without cryptography: the store never opens one.
    static let sealed = SealedPayload(sealNonce: Array(repeating: 7, count: 16),
                                      stanzas: [SealedPayload.Stanza(suite: .x25519, keyID: KeyID(value: 0x0102_0304_0506_0708),
                                                                     encapsulatedKey: Array(repeating: 1, count: 32),
                                                                     wrappedKey: Array(repeating: 2, count: 48))],
                                      body: Array(repeating: 3, count: 20)).bytes

    @Test("[4.18-1] GET /v1/recipients/{name}/keys is KEYS for the percent-decoded name; %2F is a / of the name, + is itself")
    func keysRoute() throws {
        #expect(try ProviderAPIRoute.of(method: "GET", path: "/v1/recipients/alice/keys") == .keys(recipient: "alice"))
        #expect(try ProviderAPIRoute.of(method: "GET", path: "/v1/recipients/zo%C3%AB/keys") == .keys(recipient: "zo\u{EB}"))
        #expect(try ProviderAPIRoute.of(method: "GET", path: "/v1/recipients/a%2fb%2Fc/keys") == .keys(recipient: "a/b/c"))
        #expect(try ProviderAPIRoute.of(method: "GET", path: "/v1/recipients/a+b%20c/keys") == .keys(recipient: "a+b c"))
        #expect(try ProviderAPIRoute.of(method: "GET", path: "/v1/recipients/\(String(repeating: "u", count: 64))/keys")
                == .keys(recipient: String(repeating: "u", count: 64)))
        let message = try ProviderAPIRequest.message(for: .keys(recipient: "a/b"), header: { _ in [] }, body: [])
        #expect(message == .keys(Keys(user: "a/b")))
    }

    @Test("[3.3-8] the keys route: another path is 404, another method 405 with Allow: GET, a name that cannot be an identifier 400 BAD_REQUEST")
    func keysRouteRefusals() {
        for path in ["/v1/recipients/alice", "/v1/recipients/alice/", "/v1/recipients/alice/keys/", "/v1/recipients//keys",
                     "/v1/recipients/keys", "/v1/recipients/a/b/keys", "/v1/recipients/alice/key", "/v1/recipientsalice/keys"] {
            let refused = routeProblem("GET", path)
            #expect(refused?.httpStatus == 404 && refused?.code == "NOT_FOUND", "\(path): \(String(describing: refused))")
        }
        for method in ["POST", "DELETE", "PUT"] {
            let refused = routeProblem(method, "/v1/recipients/alice/keys")
            #expect(refused?.httpStatus == 405, "\(method)")
            #expect(refused?.headers.contains { $0.0 == "Allow" && $0.1 == "GET" } == true)
        }
        let names: [(String, String)] = [
            ("alice%00", "control character"), ("alice%0a", "control character"), ("%7F", "control character"),
            ("%C2%85", "control character"), ("al%ZZice", "percent-encoded"), ("alice%4", "percent-encoded"), ("alice%", "percent-encoded"),
            ("%FF", "not UTF-8"), ("%C3", "not UTF-8"), (String(repeating: "u", count: 65), "longer than 64 bytes"),
        ]
        for (name, detail) in names {
            let refused = routeProblem("GET", "/v1/recipients/\(name)/keys")
            #expect(refused?.httpStatus == 400 && refused?.code == "BAD_REQUEST", "\(name): \(String(describing: refused))")
            #expect(refused?.detail.contains(detail) == true, "\(name): \(String(describing: refused?.detail))")
        }
    }

    @Test("[4.18-1] [4.18-3] KEYS_OK is 200 with the recipient, the cursor and each key (device, suite name, 16 hex digits, base64), and ETag: \"cursor\"")
    func keysAnswer() throws {
        let phone = DeviceKeyEntry(deviceID: "phone", key: DevicePublicKey(suite: .x25519, bytes: Array(0..<32)),
                                   keyID: KeyID(value: 0x00ab_cdef_0123_4567))
        let laptop = DeviceKeyEntry(deviceID: "zoë's laptop", key: DevicePublicKey(suite: .xwing, bytes: Array(repeating: 0xFE, count: 1216)),
                                    keyID: KeyID(value: 0xFFFF_0000_FFFF_0000))
        let reply = Message.keysOK(KeysOK(cursor: 42, keys: [phone, laptop]))
        let answer = ProviderAPIResponse.answering(reply, to: .keys(recipient: "alice"), createdAt: nil)
        #expect(answer.status == 200)
        #expect(answer.headers.contains { $0.0 == "ETag" && $0.1 == #""42""# })
        #expect(answer.headers.contains { $0.0 == "Content-Type" && $0.1 == "application/json" })
        let json = try #require(try JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])
        #expect(json["recipient"] as? String == "alice")
        #expect(json["cursor"] as? Int == 42)
        let keys = try #require(json["keys"] as? [[String: String]])
        #expect(keys.count == 2)
        #expect(keys.first == ["device": "phone", "suite": "x25519", "key_id": "00abcdef01234567",
                               "public_key": Data(Array(0..<32) as [UInt8]).base64EncodedString()])
        #expect(keys.last?["suite"] == "xwing" && keys.last?["key_id"] == "ffff0000ffff0000" && keys.last?["device"] == "zoë's laptop")
        #expect(keys.last?["public_key"].flatMap { Data(base64Encoded: $0) }.map(Array.init) == Array(repeating: 0xFE, count: 1216))

        let none = ProviderAPIResponse.answering(.keysOK(KeysOK(cursor: 0, keys: [])), to: .keys(recipient: "bob"), createdAt: nil)
        #expect(none.status == 200 && String(decoding: none.body, as: UTF8.self) == #"{"cursor":0,"keys":[],"recipient":"bob"}"#)
    }

    @Test("[4.18-3] If-None-Match naming the cursor (or *, or W/ of it, or in a list) is 304 with the ETag and no body; another cursor is 200")
    func notModified() {
        let reply = Message.keysOK(KeysOK(cursor: 42, keys: []))
        for values in [[#""42""#], [#"W/"42""#], ["*"], [#""1", "42""#], [#""1""#, #""42""#], [#" "7","42" "#], ["*, "]] {
            let answer = ProviderAPIResponse.answering(reply, to: .keys(recipient: "alice"), createdAt: nil, ifNoneMatch: values)
            #expect(answer.status == 304, "\(values)")
            #expect(answer.body.isEmpty && answer.headers.map(\.0) == ["ETag"] && answer.headers.first?.1 == #""42""#, "\(values)")
        }
        for values in [[], [#""41""#], ["42"], [#""420""#], [#""4""#], [#""1" junk "42""#], [#"x"42""#], [#"* "42""#], [#""42"#], [""]] {
            let answer = ProviderAPIResponse.answering(reply, to: .keys(recipient: "alice"), createdAt: nil, ifNoneMatch: values)
            #expect(answer.status == 200, "\(values)")
        }
        #expect(ProviderAPIProblem.reason(304) == "Not Modified")
    }

    @Test("[4.18-1] an unknown recipient's keys are 404 UNKNOWN_USER; a SEND to one stays 422; TOO_LARGE is 413")
    func keysErrors() {
        let unknown = Message.error(ErrorReply(status: .unknownUser, message: "no such user"))
        let keys = ProviderAPIResponse.answering(unknown, to: .keys(recipient: "mallory"), createdAt: nil)
        #expect(keys.status == 404)
        #expect(keys.headers.contains { $0.0 == "Content-Type" && $0.1 == "application/problem+json" })
        #expect(String(decoding: keys.body, as: UTF8.self).contains(#""code":"UNKNOWN_USER""#))
        #expect(ProviderAPIResponse.answering(unknown, to: .send, createdAt: nil).status == 422)
        let tooLarge = ProviderAPIResponse.answering(.error(ErrorReply(status: .tooLarge)), to: .keys(recipient: "alice"), createdAt: nil)
        #expect(tooLarge.status == 413)
    }

    @Test("[4.19-6] NO_DEVICE_KEYS is 422 with its code; [4.19-2] a sealed id the store knows is 409 CONFLICT")
    func sealedStatuses() {
        let none = ProviderAPIResponse.answering(.error(ErrorReply(status: .noDeviceKeys)), to: .send, createdAt: nil)
        #expect(none.status == 422 && String(decoding: none.body, as: UTF8.self).contains(#""code":"NO_DEVICE_KEYS""#))
        let conflict = ProviderAPIResponse.answering(.error(ErrorReply(status: .conflict)), to: .send, createdAt: nil)
        #expect(conflict.status == 409 && String(decoding: conflict.body, as: UTF8.self).contains(#""code":"CONFLICT""#))
    }

    @Test("[4.18-5] the 201 of a sealed SEND carries the cursor; a plain one does not")
    func createdCursor() throws {
        let id = PayloadID.random()
        let sealed = ProviderAPIResponse.answering(.sendOK(SendOK(id: id, expiresAt: 1_000, cursor: 7)), to: .send, createdAt: 500)
        #expect(sealed.status == 201)
        #expect(try JSONSerialization.jsonObject(with: Data(sealed.body)) as? [String: Any] != nil)
        #expect(String(decoding: sealed.body, as: UTF8.self).contains(#""cursor":7,"#))
        let plain = ProviderAPIResponse.answering(.sendOK(SendOK(id: id, expiresAt: 1_000)), to: .send, createdAt: 500)
        #expect(!String(decoding: plain.body, as: UTF8.self).contains("cursor"))
    }

    @Test("[4.7-5] [4.19-1] \"sealed\" (base64) is a SEND of form sealed with those bytes, the store to check them; other members as for text")
    func sealedMember() throws {
        let encoded = Data(Self.sealed).base64EncodedString()
        let send = try post(#"{"recipient":"alice","sealed":"\#(encoded)","ttl_s":60,"push":{"device":"phone","alert":true}}"#)
        #expect(send == SendRequest(user: "alice", payload: Self.sealed, form: .sealed, ttlSeconds: 60, target: .device("phone"), alert: true))
        // Not a sealed payload's structure: still a SEND, which the store refuses ([4.19-1]).
        #expect(try post(#"{"recipient":"alice","sealed":"AAEC"}"#) == SendRequest(user: "alice", payload: [0, 1, 2], form: .sealed))
    }

    @Test("[4.19-6] \"seal\": \"devices\" beside text or payload is a SEND to seal on arrival; any other value of seal is refused")
    func sealMember() throws {
        #expect(try post(#"{"recipient":"alice","text":"code 1234","seal":"devices"}"#)
                == SendRequest(user: "alice", payload: Array("code 1234".utf8), form: .sealOnArrival))
        #expect(try post(#"{"recipient":"alice","seal":"devices","payload":"AAEC/w=="}"#)
                == SendRequest(user: "alice", payload: [0, 1, 2, 255], form: .sealOnArrival))
        for value in [#""device""#, #""Devices""#, #""""#, #""devices ""#, #""none""#] {
            let refused = problem(#"{"recipient":"alice","text":"x","seal":\#(value)}"#)
            #expect(refused?.httpStatus == 422 && refused?.code == "BAD_REQUEST", "\(value)")
            #expect(refused?.detail.hasPrefix(#"seal must be "devices""#) == true, "\(value): \(String(describing: refused))")
        }
        #expect(problem(#"{"recipient":"alice","text":"x","seal":true}"#)?.detail == "seal has the wrong type")
        #expect(problem(#"{"recipient":"alice","text":"x","seal":["devices"]}"#)?.detail == "seal has the wrong type")
        let sealedTwice = problem(#"{"recipient":"alice","sealed":"AAEC","seal":"devices"}"#)
        #expect(sealedTwice?.httpStatus == 422 && sealedTwice?.detail.contains("sealed already") == true)
        #expect(problem(#"{"recipient":"alice","seal":"devices"}"#)?.detail == "give exactly one of text, payload and sealed")
        #expect(problem(#"{"recipient":"alice","text":"x","seal":"devices","seal":"devices"}"#)?.detail == "member seal is given more than once")
    }

    @Test("[4.7-5] text, payload and sealed exclude each other: two or three of them are refused 422 naming the three")
    func contentMembersExclusive() {
        let bodies = [#"{"recipient":"alice","text":"x","sealed":"AAEC"}"#, #"{"recipient":"alice","payload":"AAEC","sealed":"AAEC"}"#,
                      #"{"recipient":"alice","text":"x","payload":"AAEC","sealed":"AAEC"}"#, #"{"recipient":"alice","text":"x","payload":"AAEC"}"#]
        for body in bodies {
            #expect(problem(body) == ProviderAPIProblem(422, "BAD_REQUEST", "give exactly one of text, payload and sealed"), "\(body)")
        }
    }

    @Test("base64 of sealed and payload: not standard base64 (base64url, missing padding, stray bytes) is 422 naming the member")
    func base64Errors() {
        for encoded in ["AAE", "AA-_", "AA==AA==", "A", "AAEC\\n", "****", "AAEC AAEC"] {
            #expect(problem(#"{"recipient":"alice","sealed":"\#(encoded)"}"#)?.detail == "sealed is not standard base64", "\(encoded)")
            #expect(problem(#"{"recipient":"alice","payload":"\#(encoded)","seal":"devices"}"#)?.detail == "payload is not standard base64",
                    "\(encoded)")
        }
        #expect(problem(#"{"recipient":"alice","sealed":5}"#)?.detail == "sealed has the wrong type")
    }

    @Test("[3.3-8] a SEND to seal on arrival or sealed meets the wire's limits too: the recipient's control character is named")
    func wireLimits() {
        let refused = problem(#"{"recipient":"alice\u0000","sealed":"AAEC"}"#)
        #expect(refused?.httpStatus == 422 && refused?.detail == "recipient contains a control character: names are UTF-8 without control characters")
    }
}
