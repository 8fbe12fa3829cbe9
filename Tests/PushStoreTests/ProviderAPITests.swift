import Foundation
#if canImport(Glibc)
import Glibc
#endif
@testable import PushProviderAPI
@testable import PushStore
import PushWire
import Testing

/// The HTTP provider API's parts that need no sockets: the body, the routes, the answers.
@Suite("HTTP provider API without sockets")
struct ProviderAPITests {
    func post(_ json: String, key: String? = nil) throws(ProviderAPIProblem) -> SendRequest {
        try MessagePost.decode(Array(json.utf8)).sendRequest(idempotencyKey: key)
    }

    func problem(_ json: String) -> ProviderAPIProblem? {
        do {
            _ = try post(json)
            return nil
        } catch {
            return error
        }
    }

    @Test("[4.17-1] [4.17-2] a body becomes the SEND it describes: text or base64 payload, the push's target and options, the key")
    func bodyToSend() throws {
        let send = try post(#"{"recipient":"alice","text":"hi","ttl_s":60,"read_limit":1,"push":{"device":"phone","alert":true,"priority":10,"collapse_key":"c","ttl_s":30}}"#,
                            key: "k-1")
        #expect(send == SendRequest(user: "alice", payload: Array("hi".utf8), ttlSeconds: 60, readLimit: 1, target: .device("phone"),
                                    alert: true, priority: 10, collapseKey: "c", pushTTLSeconds: 30, idempotencyKey: "k-1"))
        #expect(try post(#"{"recipient":"alice","payload":"AAEC/w==","push":{"tag":"work"}}"#)
                == SendRequest(user: "alice", payload: [0, 1, 2, 255], target: .tag("work")))
        #expect(try post(#"{"recipient":"alice","text":""}"#) == SendRequest(user: "alice", payload: []))
    }

    @Test("bad bodies: 400 when not JSON, 422 naming what is wrong otherwise")
    func badBodies() {
        #expect(problem("{")?.httpStatus == 400)
        #expect(problem("")?.httpStatus == 400)
        #expect(problem("[]")?.httpStatus == 422)
        #expect(problem(#"{"text":"x"}"#)?.detail == "missing member recipient")
        #expect(problem(#"{"recipient":"a","text":"x","push":{"devce":"p"}}"#)?.detail == "unknown member push.devce")
        #expect(problem(#"{"recipient":"a","text":"x","extra":1}"#)?.detail == "unknown member extra")
        #expect(problem(#"{"recipient":"a","text":"x","ttl_s":-1}"#)?.detail == "ttl_s must be an integer from 0 to 4294967295")
        #expect(problem(#"{"recipient":"a","text":"x","ttl_s":1.5}"#)?.httpStatus == 422)
        #expect(problem(#"{"recipient":"a","text":"x","push":{"priority":11}}"#)?.httpStatus == 422, "over the protocol's 10")
        #expect(problem(#"{"recipient":"a","text":"x","push":{"device":"p","tag":"t"}}"#)?.httpStatus == 422)
        #expect(problem(#"{"recipient":"a"}"#)?.detail == "give exactly one of text, payload and sealed")
        #expect(problem(#"{"recipient":1,"text":"x"}"#)?.detail == "recipient has the wrong type")
        #expect(problem(#"{"recipient":"\#(String(repeating: "u", count: 65))","text":"x"}"#)?.httpStatus == 422, "the wire's 64-byte limit")
    }

    @Test("a member given twice is refused naming it, at either level, escaped or not; a number no double holds is 422 naming its member, not 'not JSON'")
    func duplicatesAndHugeNumbers() {
        #expect(problem(#"{"recipient":"a","text":"x","text":"y"}"#) == ProviderAPIProblem(422, "BAD_REQUEST", "member text is given more than once"))
        #expect(problem(#"{"recipient":"a","text":"x","push":{"tag":"t","tag":"u"}}"#)?.detail == "member push.tag is given more than once")
        #expect(problem(#"{"recipient":"a","text":"x","t\u0065xt":"y"}"#)?.detail == "member text is given more than once", "as the decoder reads it")
        #expect(problem(#"{"recipient":"a","text":"x","push":{},"push":{}}"#)?.detail == "member push is given more than once")
        let digits = String(repeating: "9", count: 5000)
        #expect(problem(#"{"recipient":"a","text":"x","ttl_s":\#(digits)}"#)?.httpStatus == 422)
        #expect(problem(#"{"recipient":"a","text":"x","ttl_s":\#(digits)}"#)?.detail.hasPrefix("ttl_s is out of range") == true)
        #expect(problem(#"{"recipient":"a","text":"x","push":{"priority":1e400}}"#)?.detail.hasPrefix("push.priority is out of range") == true)
        #expect(problem(#"{"recipient":"a","text":"x","read_limit":-1e-400}"#)?.httpStatus == 422, "rounds to 0: JSONDecoder refuses it")
        #expect(problem(#"{"recipient":"a","text":"x","ttl_s":\#(digits)"#)?.httpStatus == 400, "not JSON, whatever the number")
        #expect(problem(#"{"recipient":"a","text":"x","ttl_s":\#(digits) "x"}"#)?.httpStatus == 400)
        #expect(problem(#"{"recipient":"a","text":"x","ttl_s":1e300}"#)?.detail == "ttl_s must be an integer from 0 to 4294967295")
        #expect((try? post(#"{"recipient":"a","text":"x,\"text\":"}"#)) != nil, "a key's text inside a string is no member")
    }

    @Test("the Idempotency-Key header: none is no key; an empty one, or two, are refused 400")
    func idempotencyKeyHeader() throws {
        #expect(try ProviderAPIRequest.idempotencyKey([]) == nil)
        #expect(try ProviderAPIRequest.idempotencyKey(["k"]) == "k")
        #expect(throws: ProviderAPIProblem.self) { try ProviderAPIRequest.idempotencyKey([""]) }
        #expect(throws: ProviderAPIProblem.self) { try ProviderAPIRequest.idempotencyKey(["a", "a"]) }
        do {
            _ = try ProviderAPIRequest.idempotencyKey([""])
        } catch {
            #expect(error.httpStatus == 400 && error.code == "BAD_REQUEST")
        }
    }

    @Test("routes: POST /v1/messages, GET and DELETE /v1/messages/{id}; 404 and 405 otherwise")
    func routes() throws {
        let id = PayloadID.random()
        #expect(try ProviderAPIRoute.of(method: "POST", path: "/v1/messages") == .send)
        #expect(try ProviderAPIRoute.of(method: "GET", path: "/v1/messages/\(id.hex)") == .status(id))
        #expect(try ProviderAPIRoute.of(method: "DELETE", path: "/v1/messages/\(id.hex)") == .recall(id))
        for (method, path, status) in [("GET", "/v1/messages", 405), ("PUT", "/v1/messages/\(id.hex)", 405), ("GET", "/v1/other", 404),
                                       ("GET", "/v1/messages/xyz", 404), ("GET", "/", 404)] {
            #expect(throws: ProviderAPIProblem.self) { try ProviderAPIRoute.of(method: method, path: path) }
            do {
                _ = try ProviderAPIRoute.of(method: method, path: path)
            } catch {
                #expect(error.httpStatus == status, "\(method) \(path)")
            }
        }
    }

    @Test("the 201 body written directly is what JSONEncoder writes with sorted keys, with and without created_at")
    func sentMessageJSON() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        for created in [Optional("2026-11-29T07:05:30.123Z"), nil] {
            for replayed in [false, true] {
                let body = SentMessage(id: PayloadID.random().hex, createdAt: created, expiresAt: "2026-11-30T07:05:30.123Z", replayed: replayed)
                #expect(body.json == Array(try encoder.encode(body)))
            }
        }
        #expect(ProviderAPIJSON.time(1_764_400_000_123) == "2025-11-29T07:06:40.123Z")
        #expect(ProviderAPIJSON.time(5) == "1970-01-01T00:00:00.005Z")
        // The answer to a SEND_OK, written from the reply's values, is the same document.
        for created in [Optional(UInt64(1_764_400_000_123)), nil] {
            for replayed in [false, true] {
                for cursor in [nil, 0, 42, UInt64.max] as [UInt64?] {
                    let sent = SendOK(id: PayloadID.random(), expiresAt: 1_764_486_400_999, replayed: replayed, cursor: cursor)
                    let body = SentMessage(id: sent.id.hex, createdAt: created.map(ProviderAPIJSON.time),
                                           expiresAt: ProviderAPIJSON.time(sent.expiresAt), replayed: replayed, cursor: cursor)
                    #expect(SentMessage.json(sent, createdAt: created) == Array(try encoder.encode(body)))
                    #expect(body.json == Array(try encoder.encode(body)))
                }
            }
        }
    }

    @Test("the ISO 8601 times worked out by arithmetic are libc's calendar's, across leap years and centuries")
    func timesAreTheCalendars() {
        var generator = SystemRandomNumberGenerator()
        let instants: [UInt64] = [0, 999, 951_782_400_000, 951_868_799_999, 4_107_542_400_000, 253_402_300_799_999]
            + (0..<2000).map { _ in UInt64.random(in: 0..<253_402_300_800_000, using: &generator) }
        for ms in instants {
            var seconds = time_t(ms / 1000)
            var parts = tm()
            gmtime_r(&seconds, &parts)
            let expected = String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                                  parts.tm_hour, parts.tm_min, parts.tm_sec, Int32(ms % 1000))
            #expect(ProviderAPIJSON.time(ms) == expected)
        }
    }

    @Test("[4.17-6] protocol statuses map to the HTTP statuses a user expects; a keyed SEND's BUSY is 503 with Retry-After, like every BUSY")
    func statusMapping() {
        let cases: [(Status, Int)] = [(.badRequest, 422), (.unknownUser, 422), (.badToken, 401), (.forbidden, 403), (.notFound, 404),
                                      (.gone, 410), (.conflict, 409), (.tooLarge, 413), (.rateLimited, 429), (.busy, 503),
                                      (.shuttingDown, 503), (.internalError, 503), (.noDeviceKeys, 422)]
        for (status, http) in cases {
            #expect(ProviderAPIProblem(ErrorReply(status: status)).httpStatus == http, "\(status)")
        }
        #expect(ProviderAPIProblem(ErrorReply(status: .busy)).headers.contains { $0.0 == "Retry-After" })
    }

    @Test("a Content-Type is JSON exactly as the split, trimmed and lowercased text says")
    func contentTypes() {
        func reference(_ type: String) -> Bool {
            var media = Substring(type.split(separator: ";", omittingEmptySubsequences: false).first ?? "")
            while media.first == " " || media.first == "\t" { media.removeFirst() }
            while media.last == " " || media.last == "\t" { media.removeLast() }
            return media.lowercased() == "application/json"
        }
        let types = ["application/json", "Application/JSON; charset=utf-8", " application/json ", "application/json\t;x", "APPLICATION/JSON",
                     "text/plain", "application/jsonx", "", ";", "application/json-seq", "application/problem+json", "application\u{0F}json",
                     "application/jsoN;", "xapplication/json", "application /json"]
        for type in types {
            #expect(ProviderAPIRequest.isJSON(type) == reference(type), "\(type)")
        }
        #expect(ProviderAPIRequest.isJSON("application/json; charset=utf-8"))
    }
}
