import Foundation
import Testing
import PushClient
import PushTestSupport
import PushWire

/// The store's HTTP API against hostile HTTP, across real processes: request smuggling by
/// two Content-Lengths, the heads RFC 9112 refuses, one address holding every connection,
/// and `Expect: 100-continue` answered before the token is checked.
@Suite("HTTP provider API edges, as processes", .ownThread)
struct HTTPEdgeProcessTests {
    typealias Setup = HTTPAPIProcessTests.Setup

    /// A POST whose bytes are a whole request, to hide behind another's second Content-Length.
    static func post(_ text: String, token: String) -> String {
        let json = #"{"recipient":"alice","text":"\#(text)","push":{"alert":true}}"#
        return "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n"
            + "Content-Type: application/json\r\nContent-Length: \(json.utf8.count)\r\n\r\n" + json
    }

    @Test("Content-Length: 0 then Content-Length: N with a POST as its body: 400, the connection closed, the hidden POST never stored nor pushed")
    func smugglingByTwoContentLengths() throws {
        let setup = try Setup()
        let token = try setup.token("billing")
        let device = try SendThroughStoreProcessTests.device(setup.deployment, gateway: setup.gateway.port, registration: setup.registration)
        let hidden = Self.post("smuggled", token: token)
        let http = try setup.connection()
        try http.send("POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\nContent-Type: application/json\r\n"
                      + "Content-Length: 0\r\nContent-Length: \(hidden.utf8.count)\r\n\r\n" + hidden)
        let refused = try http.readResponse()
        #expect(refused.status == 400 && refused.headers["connection"] == "close", "\(refused.text)")
        #expect(try refused.json()["code"] as? String == "BAD_REQUEST")
        #expect(http.waitForClose(), "closed after the 400, the hidden POST unread")

        // A POST sent after it is the first (and only) the store takes and the device gets.
        let after = try setup.connection().post("/v1/messages", json: #"{"recipient":"alice","text":"after","push":{"alert":true}}"#, token: token)
        #expect(after.status == 201, "\(after.text)")
        let id = try #require((try after.json()["id"] as? String).flatMap(PayloadID.init(hex:)))
        let (_, message) = try device.receive()
        guard case .push(let push) = message else { Issue.record("the device got \(message)"); return }
        #expect(push.id == id.bytes, "the device's first push is not the POST sent after")
        #expect(setup.store.metric("securepush_store_payloads_stored_total") == 1)
        #expect(setup.store.metric("securepush_store_http_requests_refused_total", ["reason": "duplicate_content_length"]) == 1)
    }

    @Test("Content-Length: +33, HTTP/1.1 without Host, two Authorization fields: each 400 and closed, counted by reason; HTTP/1.0 without Host is served")
    func headsTheStoreRefuses() throws {
        let setup = try Setup()
        let token = try setup.token("billing")
        let json = #"{"recipient":"alice","text":"x"}"#
        let cases: [(String, String)] = [
            ("POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\nContent-Type: application/json\r\n"
             + "Content-Length: +\(json.utf8.count)\r\n\r\n" + json, "invalid_content_length"),
            ("POST /v1/messages HTTP/1.1\r\nAuthorization: Bearer \(token)\r\nContent-Type: application/json\r\n"
             + "Content-Length: \(json.utf8.count)\r\n\r\n" + json, "missing_host"),
            ("POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\nAuthorization: Bearer sp_other\r\n"
             + "Content-Type: application/json\r\nContent-Length: \(json.utf8.count)\r\n\r\n" + json, "duplicate_authorization"),
        ]
        for (request, reason) in cases {
            let http = try setup.connection()
            try http.send(request)
            let response = try http.readResponse()
            #expect(response.status == 400 && response.headers["connection"] == "close", "\(reason): \(response.text)")
            #expect(try response.json()["code"] as? String == "BAD_REQUEST", "\(reason)")
            #expect(http.waitForClose(), "\(reason): closed after the 400")
            #expect(setup.store.metric("securepush_store_http_requests_refused_total", ["reason": reason]) == 1, "\(reason)")
        }
        let old = try setup.connection()
        try old.send("POST /v1/messages HTTP/1.0\r\nAuthorization: Bearer \(token)\r\nContent-Type: application/json\r\n"
                     + "Content-Length: \(json.utf8.count)\r\n\r\n" + json)
        #expect(try old.readResponse().status == 201)
        #expect(setup.store.metric("securepush_store_payloads_stored_total") == 1)
    }

    @Test("300 idle connections from 127.0.0.1 over a cap of 300: 127.0.0.1 holds its 256 (the default per address), and a POST from 127.0.0.2 gets 201")
    func oneAddressCannotTakeEveryPlace() throws {
        let setup = try Setup(storeArguments: ["--http-max-connections", "300"])
        let token = try setup.token("billing")
        var held: [HTTPTestConnection] = []
        for _ in 0..<300 {
            let connection = try HTTPTestConnection(port: setup.httpPort, timeoutMs: 5_000, source: "127.0.0.1")
            try connection.send("POST /v1/messages HTTP/1.1\r\n")
            held.append(connection)
        }
        #expect(try waitUntil {
            setup.store.metric("securepush_store_http_refused_per_address_total") == 44
                && setup.store.metric("securepush_store_http_connections") == 256
        }, "\(String(describing: setup.store.metric("securepush_store_http_connections"))) open")
        let other = try HTTPTestConnection(port: setup.httpPort, timeoutMs: 5_000, source: "127.0.0.2")
        let sent = try other.post("/v1/messages", json: #"{"recipient":"alice","text":"from elsewhere"}"#, token: token)
        #expect(sent.status == 201, "\(sent.text)")
        let again = try HTTPTestConnection(port: setup.httpPort, timeoutMs: 5_000, source: "127.0.0.1").readResponse()
        #expect(again.status == 503 && (try? again.json()["code"] as? String) == "BUSY")
        withExtendedLifetime(held) {}
    }

    @Test("Expect: 100-continue: without a token 401 and no 100 Continue, over the size 413, with a good token 100 Continue then 201")
    func expectContinueAfterTheToken() throws {
        let setup = try Setup(storeArguments: ["--max-payload", "1000"])
        let token = try setup.token("billing")
        let json = #"{"recipient":"alice","text":"asked first"}"#
        func head(_ authorization: String?, length: Int) -> String {
            "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n" + (authorization.map { "Authorization: Bearer \($0)\r\n" } ?? "")
                + "Content-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: \(length)\r\n\r\n"
        }

        for authorization in [nil, "sp_notatoken"] {
            let refused = try setup.connection()
            try refused.send(head(authorization, length: json.utf8.count))
            let answer = try refused.readResponse()
            #expect(answer.status == 401 && answer.headers["connection"] == "close", "\(answer.status) \(answer.text)")
            #expect(refused.waitForClose(), "closed without reading the body")
        }
        let large = try setup.connection()
        try large.send(head(token, length: 100_000))
        let tooLarge = try large.readResponse()
        #expect(tooLarge.status == 413 && (try? tooLarge.json()["code"] as? String) == "TOO_LARGE", "\(tooLarge.status)")

        let good = try setup.connection()
        try good.send(head(token, length: json.utf8.count))
        #expect(try good.readResponse().status == 100)
        try good.send(json)
        let sent = try good.readResponse()
        #expect(sent.status == 201, "\(sent.text)")
        #expect(setup.store.metric("securepush_store_payloads_stored_total") == 1)
        #expect(setup.store.metric("securepush_store_http_requests_total", ["route": "send", "status": "401", "provider": "-"]) == 2)
    }
}
