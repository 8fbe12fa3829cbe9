import Foundation
import Synchronization
import Testing
import PushClient
import PushProcess
import PushSecurity
import PushTestSupport
import PushWire

/// The store's HTTP provider API across real processes: `securepush store --http` with a
/// gateway, tokens from `securepush provider token create`, a device at the gateway.
@Suite("HTTP provider API, as processes", .ownThread)
struct HTTPAPIProcessTests {
    /// A deployment with alice and her enrolled phone, a gateway, and a store handing
    /// SENDs' pushes to it with the HTTP API on.
    final class Setup {
        let deployment: TemporaryDeployment
        let gateway: ServiceProcess
        let store: ServiceProcess
        let registration: [UInt8]

        init(storeArguments: [String] = []) throws {
            deployment = try TemporaryDeployment()
            try deployment.addUser("alice", password: "alice-pw")
            registration = try deployment.enroll("phone")
            gateway = try ServiceProcess(["gateway", "--data-dir", deployment.directory])
            store = try ServiceProcess(["store", "--data-dir", deployment.directory, "--gateway", "127.0.0.1:\(gateway.port)",
                                        "--http", "127.0.0.1:0", "--metrics", "127.0.0.1:0"] + storeArguments)
        }

        deinit {
            _ = store.terminate()
            _ = gateway.terminate()
        }

        var httpPort: Int { store.announcedHTTPPort ?? 0 }

        func token(_ provider: String) throws -> String {
            let made = try SecurePushBinary.run(["provider", "token", "create", provider, "--data-dir", deployment.directory])
            guard made.status == 0 else { throw ServiceError.failed(made.stderr) }
            return made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        func connection() throws -> HTTPTestConnection { try HTTPTestConnection(port: httpPort) }
    }

    @Test("[4.17-1] [4.17-3] [4.12-2] POST /v1/messages answers 201 with the id and its times, the device gets the push, GET reports it handed over, DELETE recalls it")
    func sendStatusRecall() throws {
        let setup = try Setup()
        let token = try setup.token("billing")
        let device = try SendThroughStoreProcessTests.device(setup.deployment, gateway: setup.gateway.port, registration: setup.registration)
        let http = try setup.connection()

        let sent = try http.post("/v1/messages", json: #"{"recipient":"alice","text":"your code is 2213","push":{"alert":true}}"#, token: token)
        #expect(sent.status == 201, "\(sent.text)")
        let body = try sent.json()
        let id = try #require((body["id"] as? String).flatMap(PayloadID.init(hex:)), "\(sent.text)")
        #expect(body["created_at"] is String && body["expires_at"] is String && body["replayed"] as? Bool == false)
        #expect(sent.headers["location"] == "/v1/messages/\(id.hex)")
        #expect(sent.headers["content-type"] == "application/json")

        let (header, message) = try device.receive()
        guard case .push(let push) = message else { Issue.record("the device got \(message)"); return }
        #expect(push.id == id.bytes && push.alert)
        _ = try device.send(.deliveryAck(DeliveryAck(id: push.id)), correlation: header.correlation)

        var status: HTTPTestResponse?
        #expect(try waitUntil {
            status = try http.request("GET", "/v1/messages/\(id.hex)", headers: [("Authorization", "Bearer \(token)")])
            return ((try? status?.json())?["push"] as? [String: Any])?["state"] as? String == "handed"
        }, "\(status?.text ?? "")")
        let state = try #require(status).json()
        #expect(status?.status == 200 && state["state"] as? String == "stored" && state["fetch_count"] as? Int == 0)
        #expect((state["push"] as? [String: Any])?["written"] as? Int == 1)

        let recalled = try http.request("DELETE", "/v1/messages/\(id.hex)", headers: [("Authorization", "Bearer \(token)")])
        #expect(recalled.status == 204 && recalled.body.isEmpty, "\(recalled.text)")
        let after = try http.request("GET", "/v1/messages/\(id.hex)", headers: [("Authorization", "Bearer \(token)")])
        #expect(try after.status == 200 && (try after.json())["state"] as? String == "gone", "\(after.text)")
        #expect(setup.store.metric("securepush_store_http_requests_total", ["route": "send", "status": "201", "provider": "billing"]) == 1)
    }

    @Test("[4.17-5] [4.17-7] an Idempotency-Key replays the first answer and stores nothing; other content gets 409; another provider's key, or the protocol provider's, is its own")
    func idempotencyOverHTTP() throws {
        let setup = try Setup()
        let billing = try setup.token("billing"), alerts = try setup.token("alerts")
        let http = try setup.connection()
        let key = [("Idempotency-Key", "order-17")]
        let json = #"{"recipient":"alice","text":"paid"}"#

        let first = try http.post("/v1/messages", json: json, token: billing, headers: key)
        let again = try http.post("/v1/messages", json: json, token: billing, headers: key)
        #expect(first.status == 201 && again.status == 201, "\(first.text) \(again.text)")
        let id = try first.json()["id"] as? String
        #expect(try again.json()["id"] as? String == id && again.json()["replayed"] as? Bool == true)
        #expect(again.headers["idempotent-replayed"] == "true")
        let createdAt = try first.json()["created_at"] as? String
        let replayedCreatedAt = try again.json()["created_at"] as? String
        #expect(createdAt != nil && replayedCreatedAt == createdAt, "a replay gets the first answer: \(again.text)")
        #expect(try again.json()["expires_at"] as? String == first.json()["expires_at"] as? String)

        let other = try http.post("/v1/messages", json: #"{"recipient":"alice","text":"refunded"}"#, token: billing, headers: key)
        #expect(try other.status == 409 && (try other.json())["code"] as? String == "CONFLICT", "\(other.text)")
        #expect(other.headers["content-type"] == "application/problem+json")

        let otherProvider = try http.post("/v1/messages", json: json, token: alerts, headers: key)
        #expect(try otherProvider.status == 201 && (try otherProvider.json())["id"] as? String != id, "\(otherProvider.text)")
        let provider = try setup.deployment.provider(store: setup.store.port)
        guard case .sendOK(let binary) = try provider.request(.send(SendRequest(user: "alice", payload: Array("paid".utf8),
                                                                                idempotencyKey: "order-17"))) else {
            Issue.record("the protocol SEND failed"); return
        }
        #expect(binary.id.hex != id && !binary.replayed)
        #expect(setup.store.metric("securepush_store_payloads_stored_total") == 3)
    }

    @Test("[4.17-6] the same Idempotency-Key on eight connections at once: one commit, the others 503 BUSY with Retry-After (retry), never a final 409; the retry replays")
    func concurrentKeyIsRetryable() throws {
        let setup = try Setup()
        let token = try setup.token("billing")
        let connections = try (0..<8).map { _ in try setup.connection() }
        var busySeen = false
        for round in 0..<20 where !busySeen {
            let key = [("Idempotency-Key", "race-\(round)")]
            let json = #"{"recipient":"alice","text":"race \#(round)"}"#
            let answers = try HTTPTestConnection.postAtOnce(connections, path: "/v1/messages", json: json, token: token, headers: key)
            #expect(answers.allSatisfy { $0.status == 201 || $0.status == 503 }, "\(answers.map { "\($0.status) \($0.text)" })")
            let ids = Set(answers.filter { $0.status == 201 }.compactMap { try? $0.json()["id"] as? String })
            #expect(ids.count == 1, "one payload for one key: \(ids)")
            for busy in answers where busy.status == 503 {
                busySeen = true
                let code = try busy.json()["code"] as? String
                #expect(code == "BUSY" && busy.headers["retry-after"] == "1", "\(busy.text)")
                let retried = try connections[0].post("/v1/messages", json: json, token: token, headers: key)
                let document = try retried.json()
                let replayedID = document["id"] as? String ?? ""
                #expect(retried.status == 201 && document["replayed"] as? Bool == true && ids.contains(replayedID), "\(retried.text)")
            }
        }
        #expect(busySeen, "no two of the requests were in flight at once in 20 rounds")
    }

    @Test("an empty Idempotency-Key, or two, is refused (400) rather than taken as none; a member given twice, or a number no double holds, is 422 naming the member")
    func bodyAndKeyRules() throws {
        let setup = try Setup()
        let token = try setup.token("billing")
        let http = try setup.connection()
        let good = #"{"recipient":"alice","text":"x"}"#
        func problem(_ response: HTTPTestResponse) -> (Int, String, String) {
            let document = try? response.json()
            return (response.status, document?["code"] as? String ?? "", document?["detail"] as? String ?? "")
        }
        let empty = problem(try http.request("POST", "/v1/messages", headers: [("Authorization", "Bearer \(token)"),
                                                                               ("Content-Type", "application/json"), ("Idempotency-Key", "")],
                                             body: Array(good.utf8)))
        #expect(empty.0 == 400 && empty.1 == "BAD_REQUEST" && empty.2.contains("Idempotency-Key"), "\(empty)")
        let twice = problem(try http.post("/v1/messages", json: good, token: token, headers: [("Idempotency-Key", "a"), ("Idempotency-Key", "b")]))
        #expect(twice.0 == 400 && twice.2.contains("Idempotency-Key"), "\(twice)")
        let duplicate = problem(try http.post("/v1/messages", json: #"{"recipient":"alice","text":"x","text":"y"}"#, token: token))
        #expect(duplicate.0 == 422 && duplicate.2.contains("text"), "\(duplicate)")
        let nested = problem(try http.post("/v1/messages", json: #"{"recipient":"alice","text":"x","push":{"alert":true,"alert":false}}"#, token: token))
        #expect(nested.0 == 422 && nested.2.contains("push.alert"), "\(nested)")
        let huge = problem(try http.post("/v1/messages", json: #"{"recipient":"alice","text":"x","ttl_s":\#(String(repeating: "9", count: 5000))}"#,
                                         token: token))
        #expect(huge.0 == 422 && huge.1 == "BAD_REQUEST" && huge.2.contains("ttl_s"), "\(huge)")
        #expect(setup.store.metric("securepush_store_payloads_stored_total") ?? 0 == 0, "none of them stored anything")
    }

    @Test("every error is application/problem+json with the protocol status name: 400, 401, 403, 404, 405, 413, 415, 422, 429")
    func errorStatuses() throws {
        let setup = try Setup(storeArguments: ["--max-payload", "1000"])
        let token = try setup.token("billing")
        let http = try setup.connection()
        func expect(_ response: HTTPTestResponse, _ status: Int, _ code: String, _ comment: Comment, sourceLocation: SourceLocation = #_sourceLocation) {
            let problem = try? response.json()
            #expect(response.status == status && problem?["code"] as? String == code && problem?["status"] as? Int == status
                    && response.headers["content-type"] == "application/problem+json",
                    "\(comment): \(response.status) \(response.text)", sourceLocation: sourceLocation)
        }
        let good = #"{"recipient":"alice","text":"x"}"#

        let anonymous = try http.post("/v1/messages", json: good, token: nil)
        expect(anonymous, 401, "AUTH_REQUIRED", "no token")
        #expect(anonymous.headers["www-authenticate"]?.hasPrefix("Bearer") == true)
        expect(try http.post("/v1/messages", json: good, token: "sp_0123456789ab_" + String(repeating: "A", count: 43)), 401, "BAD_TOKEN", "unknown token")
        expect(try http.request("GET", "/v2/things", headers: [("Authorization", "Bearer \(token)")]), 404, "NOT_FOUND", "unknown path")
        expect(try http.request("GET", "/v1/messages/\(PayloadID.random().hex)", headers: [("Authorization", "Bearer \(token)")]),
               404, "NOT_FOUND", "unknown id")
        expect(try http.request("GET", "/v1/messages/not-an-id", headers: [("Authorization", "Bearer \(token)")]), 404, "NOT_FOUND", "bad id")
        let made = try SecurePushBinary.run(["provider", "token", "create", "sender", "--scope", "send", "--data-dir", setup.deployment.directory])
        let sendOnly = made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        expect(try http.request("GET", "/v1/messages/\(PayloadID.random().hex)", headers: [("Authorization", "Bearer \(sendOnly)")]),
               403, "FORBIDDEN", "a send-only token reading a status")
        expect(try http.request("DELETE", "/v1/messages/\(PayloadID.random().hex)", headers: [("Authorization", "Bearer \(sendOnly)")]),
               403, "FORBIDDEN", "a send-only token recalling")
        #expect(try http.post("/v1/messages", json: good, token: sendOnly).status == 201)
        let put = try http.request("PUT", "/v1/messages", headers: [("Authorization", "Bearer \(token)")])
        expect(put, 405, "BAD_REQUEST", "PUT")
        #expect(put.headers["allow"] == "POST")
        expect(try http.request("POST", "/v1/messages", headers: [("Authorization", "Bearer \(token)"), ("Content-Type", "text/plain")],
                                body: Array(good.utf8)), 415, "BAD_REQUEST", "text/plain")
        expect(try http.post("/v1/messages", json: #"{"recipient":"alice","#, token: token), 400, "BAD_REQUEST", "truncated JSON")
        expect(try http.post("/v1/messages", json: "[1,2]", token: token), 422, "BAD_REQUEST", "an array")
        expect(try http.post("/v1/messages", json: #"{"text":"x"}"#, token: token), 422, "BAD_REQUEST", "no recipient")
        expect(try http.post("/v1/messages", json: #"{"recipient":"alice","text":"x","colapse_key":"k"}"#, token: token), 422, "BAD_REQUEST",
               "unknown member")
        expect(try http.post("/v1/messages", json: #"{"recipient":"alice","text":"x","payload":"eA=="}"#, token: token), 422, "BAD_REQUEST",
               "text and payload")
        expect(try http.post("/v1/messages", json: #"{"recipient":"alice","payload":"%%%"}"#, token: token), 422, "BAD_REQUEST", "bad base64")
        expect(try http.post("/v1/messages", json: #"{"recipient":"alice","text":"x","push":{"priority":300}}"#, token: token), 422,
               "BAD_REQUEST", "priority out of range")
        expect(try http.post("/v1/messages", json: #"{"recipient":"alice","text":"x","push":{"priority":200}}"#, token: token), 422,
               "BAD_REQUEST", "priority over the protocol's")
        let longUser = String(repeating: "u", count: 65)
        expect(try http.post("/v1/messages", json: #"{"recipient":"\#(longUser)","text":"x"}"#, token: token), 422, "BAD_REQUEST",
               "a recipient over the wire's 64 bytes")
        expect(try http.post("/v1/messages", json: #"{"recipient":"bob","text":"x"}"#, token: token), 422, "UNKNOWN_USER", "unknown user")
        expect(try http.post("/v1/messages", json: #"{"recipient":"alice","text":"\#(String(repeating: "x", count: 1001))"}"#, token: token),
               413, "TOO_LARGE", "over --max-payload")
        // Over the body limit evhttp itself answers 413, before the API sees the request.
        let huge = try setup.connection().post("/v1/messages", json: String(repeating: " ", count: 64 * 1024), token: token)
        #expect(huge.status == 413, "\(huge.status)")

        // The address has had one token refused; 19 more and the limit is reached ([8-5]).
        for _ in 0..<19 {
            _ = try http.post("/v1/messages", json: good, token: "sp_0123456789ab_" + String(repeating: "B", count: 43))
        }
        expect(try http.post("/v1/messages", json: good, token: token), 429, "RATE_LIMITED", "after 20 refused tokens, even a good one")
        #expect(waitUntil { setup.store.standardErrorText().split(separator: "\n").contains { $0.contains("rate limited") && $0.contains("HTTP POST send") } },
                "a 429 is logged like the protocol's rate limits")
        #expect(setup.store.metric("securepush_store_http_tokens_refused_total") == 20)
        #expect(setup.store.standardErrorText().contains("API token refused"))
        // The secret is all after "sp_" and the 12-digit id (base64url may hold '_' itself).
        #expect(!setup.store.standardErrorText().contains(String(token.dropFirst(16))), "the secret is never logged")
    }

    @Test("a revoked token is refused at once (401 BAD_TOKEN); its provider's other tokens keep working")
    func revocationIsImmediate() throws {
        let setup = try Setup()
        let first = try setup.token("billing"), second = try setup.token("billing")
        let http = try setup.connection()
        let json = #"{"recipient":"alice","text":"x"}"#
        #expect(try http.post("/v1/messages", json: json, token: first).status == 201)
        let id = String(first.split(separator: "_")[1])
        let revoked = try SecurePushBinary.run(["provider", "token", "revoke", id, "--data-dir", setup.deployment.directory])
        #expect(revoked.status == 0, "\(revoked.stderr)")
        let refused = try http.post("/v1/messages", json: json, token: first)
        #expect(try refused.status == 401 && (try refused.json())["code"] as? String == "BAD_TOKEN", "\(refused.text)")
        #expect(try http.post("/v1/messages", json: json, token: second).status == 201)
        #expect(try waitUntil { setup.store.standardErrorText().contains("revoked") })
    }

    @Test("hostile clients: a request trickled in is closed at the request deadline and counted; a head over 8 KiB is refused")
    func slowAndOversizedClients() throws {
        let setup = try Setup(storeArguments: ["--http-request-timeout-ms", "500"])
        let slow = try setup.connection()
        try slow.send("POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        #expect(try waitUntil(timeoutSeconds: 10) { slow.closedByServer() }, "closed once the deadline passed")
        #expect(try waitUntil { setup.store.metric("securepush_store_http_deadline_closes_total") == 1 })

        let big = try setup.connection().request("GET", "/v1/messages/x", headers: [("X-Filler", String(repeating: "f", count: 9000))])
        #expect(big.status == 400, "evhttp answers an oversized head 400 itself: \(big.status)")
    }

    @Test("the HTTP connection cap answers one more connection 503 and closes it; a freed place serves again; the protocol port is not capped by it")
    func connectionCap() throws {
        let setup = try Setup(storeArguments: ["--http-max-connections", "3"])
        let token = try setup.token("billing")
        var held = try (0..<3).map { _ in try setup.connection() }
        for connection in held { try connection.send("GET") }
        #expect(try waitUntil { setup.store.metric("securepush_store_http_connections") == 3 })
        let refused = try HTTPTestConnection(port: setup.httpPort).readResponse()
        #expect(refused.status == 503 && refused.headers["retry-after"] != nil, "\(refused.text)")
        #expect(try refused.json()["code"] as? String == "BUSY")
        #expect(try waitUntil { setup.store.metric("securepush_store_http_refused_at_cap_total") == 1 })

        held.removeLast()
        #expect(try waitUntil { setup.store.metric("securepush_store_http_connections") == 2 })
        #expect(try setup.connection().post("/v1/messages", json: #"{"recipient":"alice","text":"x"}"#, token: token).status == 201,
                "served again once a place is free")
        #expect(try setup.deployment.provider(store: setup.store.port).request(.ping) == .pong)
        _ = held
    }

    @Test("[4.17-3] a store without --gateway answers POST /v1/messages 422 (it hands no pushes), and keeps answering GET")
    func storeWithoutGateway() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let store = try ServiceProcess(["store", "--data-dir", deployment.directory, "--http", "127.0.0.1:0"])
        defer { _ = store.terminate() }
        let token = try SecurePushBinary.run(["provider", "token", "create", "billing", "--data-dir", deployment.directory])
            .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let http = try HTTPTestConnection(port: try #require(store.announcedHTTPPort))
        let sent = try http.post("/v1/messages", json: #"{"recipient":"alice","text":"x"}"#, token: token)
        #expect(sent.status == 422 && sent.text.contains("--gateway"), "\(sent.text)")
    }

    @Test("with --tls-cert the HTTP API is HTTPS on every loop: curl verifying the certificate sends, plain HTTP is not served")
    func httpsOnLoops() throws {
        let certificates = try CommandMessageTests.Certificates()
        let tls = ["--tls-cert", certificates.certificate, "--tls-key", certificates.key]
        let setup = try Setup(storeArguments: tls + ["--loops", "2"])
        let token = try setup.token("billing")
        for _ in 0..<4 {
            let sent = try ChildProcess.run(executable: "/usr/bin/env", arguments: [
                "curl", "-sS", "--cacert", certificates.certificate, "https://localhost:\(setup.httpPort)/v1/messages",
                "-H", "Authorization: Bearer \(token)", "-H", "Content-Type: application/json",
                "-d", #"{"recipient":"alice","text":"over tls"}"#, "-w", "\n%{http_code}",
            ], seconds: 30)
            #expect(sent.status == 0 && sent.stdout.hasSuffix("\n201"), "\(sent.stdout)\(sent.stderr)")
        }
        let plain = try? HTTPTestConnection(port: setup.httpPort, timeoutMs: 2_000).request("GET", "/v1/messages")
        #expect(plain?.status == nil, "no HTTP answer on the HTTPS port")
    }

    @Test("[4.17-1] the store SIGKILLed while POSTs flow on four connections: after a restart every message answered 201 is there, with its push")
    func acknowledgedPostsSurviveSIGKILL() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        _ = try deployment.enroll("phone")
        let storePort = try freeLoopbackPort(), httpPort = try freeLoopbackPort(), gatewayPort = try freeLoopbackPort()
        let arguments = ["store", "--data-dir", deployment.directory, "--gateway", "127.0.0.1:\(gatewayPort)", "--http", "127.0.0.1:\(httpPort)"]
        let first = try ServiceProcess(arguments, listen: "127.0.0.1:\(storePort)")
        let token = try SecurePushBinary.run(["provider", "token", "create", "billing", "--data-dir", deployment.directory])
            .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let acknowledged = Mutex<[String]>([])
        let senders = DispatchGroup()
        for sender in 0..<4 {
            DispatchQueue.global().async(group: senders) {
                guard let http = try? HTTPTestConnection(port: httpPort, timeoutMs: 5_000) else { return }
                for index in 0..<10_000 {
                    let json = #"{"recipient":"alice","text":"message \#(sender)-\#(index)","push":{"device":"phone"}}"#
                    guard let sent = try? http.post("/v1/messages", json: json, token: token), sent.status == 201,
                          let id = (try? sent.json())?["id"] as? String else { return }
                    acknowledged.withLock { $0.append(id) }
                }
            }
        }
        #expect(try waitUntil { acknowledged.withLock { $0.count } >= 400 })
        first.killHard()
        senders.wait()
        _ = first.child.wait(seconds: 10)
        let ids = acknowledged.withLock { $0 }

        let second = try ServiceProcess(arguments, listen: "127.0.0.1:\(storePort)")
        defer { _ = second.terminate() }
        let http = try HTTPTestConnection(port: httpPort)
        var missing: [String] = []
        for id in ids {
            let status = try http.request("GET", "/v1/messages/\(id)", headers: [("Authorization", "Bearer \(token)")])
            let push = (try? status.json())?["push"] as? [String: Any]
            if status.status != 200 || push?["state"] as? String == "none" { missing.append(id) }
        }
        #expect(missing.isEmpty, "\(missing.count) of \(ids.count) acknowledged messages lost or without their push")
    }
}
