import Foundation
import Testing
import PushClient
import PushTestSupport
import PushWire

/// Status and recall are the sending provider's alone (SPEC.md 4.11-3, 4.12-3, 4.12-4), over
/// the HTTP API and on the wire alike, on either backend: a store process with the HTTP API,
/// tokens from `securepush provider token create`, the provider key's holders on the wire.
struct ProviderScopeScenarios {
    let deployment: TemporaryDeployment
    let store: ServiceProcess

    /// A store with alice and her enrolled phone, on SQLite or on the PostgreSQL database
    /// `database`. Its gateway is nowhere: SENDs wait in the outbox, which is all these need.
    init(database: String?) throws {
        deployment = try TemporaryDeployment(database: database)
        try deployment.addUser("alice", password: "alice-pw")
        _ = try deployment.enroll("phone")
        let nowhere = try freeLoopbackPort()
        store = try ServiceProcess(["store", "--data-dir", deployment.directory, "--gateway", "127.0.0.1:\(nowhere)",
                                    "--http", "127.0.0.1:0", "--loops", "1"])
    }

    func stop() { _ = store.terminate() }

    func token(_ provider: String, scope: String? = nil) throws -> String {
        let made = try SecurePushBinary.run(["provider", "token", "create", provider, "--data-dir", deployment.directory]
                                            + (scope.map { ["--scope", $0] } ?? []))
        guard made.status == 0 else { throw ServiceError.failed(made.stderr) }
        return made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func http() throws -> HTTPTestConnection { try HTTPTestConnection(port: try #require(store.announcedHTTPPort)) }

    /// POST /v1/messages as `token`'s provider: the new id.
    func post(_ text: String, token: String, on http: HTTPTestConnection) throws -> PayloadID {
        let sent = try http.post("/v1/messages", json: #"{"recipient":"alice","text":"\#(text)"}"#, token: token)
        guard sent.status == 201, let id = (try sent.json()["id"] as? String).flatMap(PayloadID.init(hex:)) else {
            throw ServiceError.failed("POST answered \(sent.status): \(sent.text)")
        }
        return id
    }

    func call(_ method: String, _ id: PayloadID, token: String, on http: HTTPTestConnection) throws -> HTTPTestResponse {
        try http.request(method, "/v1/messages/\(id.hex)", headers: [("Authorization", "Bearer \(token)")])
    }

    /// What a client sees of a response, but the clock's `Date`.
    static func visible(_ response: HTTPTestResponse) -> String {
        let headers = response.headers.filter { $0.key != "date" }.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
        return "\(response.status)\n" + headers.joined(separator: "\n") + "\n\n" + response.text
    }

    /// alice's phone logs in at the store and FETCHes `id`.
    func fetch(_ id: PayloadID) throws -> Message {
        let device = try BlockingWireClient(host: "127.0.0.1", port: store.port, timeoutMs: 10_000)
        guard case .helloOK = try device.hello(Hello(role: .device)) else { throw ServiceError.failed("the store refused the device") }
        guard case .loginOK(let login) = try device.request(.login(Login(user: "alice", password: Array("alice-pw".utf8), deviceID: "phone")))
        else { throw ServiceError.failed("LOGIN failed") }
        return try device.request(.fetch(Fetch(id: id, token: login.token)))
    }

    /// B's token asks about A's message: 404 for GET and DELETE, byte for byte what an id
    /// that does not exist gets; the message is untouched: A's GET sees it, alice's phone
    /// fetches it, and A recalls it.
    func httpProvidersAreApart() throws {
        let (billing, crm) = (try token("billing"), try token("crm"))
        let http = try http()
        let id = try post("for billing's eyes", token: billing, on: http)
        let unknown = PayloadID.random()
        for method in ["GET", "DELETE"] {
            let other = try call(method, id, token: crm, on: http)
            let none = try call(method, unknown, token: crm, on: http)
            #expect(other.status == 404, "\(method): \(other.text)")
            #expect(Self.visible(other) == Self.visible(none), "\(method): another provider's id answers as one that does not exist")
        }
        let status = try call("GET", id, token: billing, on: http)
        #expect(try status.status == 200 && (try status.json())["state"] as? String == "stored", "\(status.text)")
        guard case .fetchOK(let fetched) = try fetch(id) else { Issue.record("alice's phone could not fetch the message"); return }
        #expect(fetched.payload == Array("for billing's eyes".utf8))
        #expect(try call("DELETE", id, token: billing, on: http).status == 204)
        let after = try call("GET", id, token: billing, on: http)
        #expect(try after.status == 200 && (try after.json())["state"] as? String == "gone", "\(after.text)")
        #expect(try call("GET", id, token: crm, on: http).status == 404, "gone or not, still not crm's")
    }

    /// The provider key's holders on the wire and an API provider are apart: STATUS and
    /// RECALL of the API provider's message get NOT_FOUND, the reply an unknown id gets, and
    /// the API provider's token gets 404 for theirs. A token made for `provider-key` is the
    /// key's holders over HTTP.
    func wireAndHTTPProviders() throws {
        let (billing, keyHolders) = (try token("billing"), try token("provider-key"))
        let http = try http()
        let fromHTTP = try post("from billing", token: billing, on: http)
        let wire = try deployment.provider(store: store.port)
        let unknown = PayloadID.random()
        #expect(try wire.request(.status(StatusRequest(id: fromHTTP))) == (try wire.request(.status(StatusRequest(id: unknown)))))
        #expect(try wire.request(.recall(Recall(id: fromHTTP))) == (try wire.request(.recall(Recall(id: unknown)))))
        guard case .error(let refused) = try wire.request(.status(StatusRequest(id: fromHTTP))) else {
            Issue.record("the provider key's holders saw billing's message"); return
        }
        #expect(refused.status == .notFound)
        guard case .fetchOK = try fetch(fromHTTP) else { Issue.record("the wire's RECALL touched billing's message"); return }

        guard case .storeOK(let stored) = try wire.request(.store(StoreRequest(user: "alice", payload: [1, 2, 3]))) else {
            Issue.record("STORE failed"); return
        }
        guard case .statusOK = try wire.request(.status(StatusRequest(id: stored.id))) else { Issue.record("the sender's own STATUS failed"); return }
        #expect(try call("GET", stored.id, token: billing, on: http).status == 404)
        #expect(try call("DELETE", stored.id, token: billing, on: http).status == 404)
        let asKeyHolders = try call("GET", stored.id, token: keyHolders, on: http)
        #expect(asKeyHolders.status == 200, "a token for provider-key speaks for the key's holders: \(asKeyHolders.text)")
        #expect(try call("GET", fromHTTP, token: keyHolders, on: http).status == 404)
        #expect(try wire.request(.recall(Recall(id: stored.id))) == .recallOK(RecallOK(id: stored.id)))
    }

    /// A token with `any-provider` sees and recalls every provider's messages; without
    /// `status`, it still may not GET.
    func anyProviderSeesAll() throws {
        let (billing, audit) = (try token("billing"), try token("audit", scope: "status,recall,any-provider"))
        let recallOnly = try token("audit", scope: "recall,any-provider")
        let http = try http()
        let fromHTTP = try post("from billing", token: billing, on: http)
        let wire = try deployment.provider(store: store.port)
        guard case .storeOK(let fromWire) = try wire.request(.store(StoreRequest(user: "alice", payload: [7]))) else {
            Issue.record("STORE failed"); return
        }
        for id in [fromHTTP, fromWire.id] {
            let seen = try call("GET", id, token: audit, on: http)
            #expect(seen.status == 200, "\(seen.text)")
        }
        #expect(try call("GET", fromHTTP, token: recallOnly, on: http).status == 403)
        #expect(try call("DELETE", fromWire.id, token: recallOnly, on: http).status == 204)
        guard case .statusOK(let status) = try wire.request(.status(StatusRequest(id: fromWire.id))) else { Issue.record("STATUS failed"); return }
        #expect(status.state == .gone, "recalled by the operator's token")
        #expect(try call("DELETE", fromHTTP, token: audit, on: http).status == 204)
    }
}

@Suite("Provider scope of status and recall, SQLite store process", .ownThread)
struct ProviderScopeProcessTests {
    @Test("[4.11-3] [4.12-3] another provider's token gets 404 for GET and DELETE, byte for byte an unknown id's; the message stays: its provider sees and recalls it, the device fetches it")
    func httpProvidersAreApart() throws {
        let scenarios = try ProviderScopeScenarios(database: nil)
        defer { scenarios.stop() }
        try scenarios.httpProvidersAreApart()
    }

    @Test("[4.11-3] [4.12-3] [4.12-4] the wire's STATUS and RECALL get NOT_FOUND for an API provider's message, as for an unknown id; a token for provider-key is the key's holders")
    func wireAndHTTPProviders() throws {
        let scenarios = try ProviderScopeScenarios(database: nil)
        defer { scenarios.stop() }
        try scenarios.wireAndHTTPProviders()
    }

    @Test("[4.12-4] a token with the scope any-provider sees and recalls every provider's messages")
    func anyProviderSeesAll() throws {
        let scenarios = try ProviderScopeScenarios(database: nil)
        defer { scenarios.stop() }
        try scenarios.anyProviderSeesAll()
    }
}

@Suite("Provider scope of status and recall, PostgreSQL store process", .ownThread, .serialized, .enabled(if: PostgresCluster.testsEnabled))
struct PostgresProviderScopeProcessTests {
    @Test("[4.11-3] [4.12-3] on PostgreSQL another provider's token gets 404 for GET and DELETE, byte for byte an unknown id's; the message stays")
    func httpProvidersAreApart() throws {
        let scenarios = try ProviderScopeScenarios(database: try PostgresCluster.shared().createDatabase())
        defer { scenarios.stop() }
        try scenarios.httpProvidersAreApart()
    }

    @Test("[4.11-3] [4.12-3] [4.12-4] on PostgreSQL the wire's STATUS and RECALL get NOT_FOUND for an API provider's message; a token for provider-key is the key's holders")
    func wireAndHTTPProviders() throws {
        let scenarios = try ProviderScopeScenarios(database: try PostgresCluster.shared().createDatabase())
        defer { scenarios.stop() }
        try scenarios.wireAndHTTPProviders()
    }

    @Test("[4.12-4] on PostgreSQL a token with the scope any-provider sees and recalls every provider's messages")
    func anyProviderSeesAll() throws {
        let scenarios = try ProviderScopeScenarios(database: try PostgresCluster.shared().createDatabase())
        defer { scenarios.stop() }
        try scenarios.anyProviderSeesAll()
    }
}
