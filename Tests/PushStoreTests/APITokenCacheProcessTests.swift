import Foundation
import Testing
import PushTestSupport

/// API tokens cached by each store, revoked at once everywhere: two store processes over one
/// database (a SQLite file, a PostgreSQL database), each having accepted a token (so each
/// keeps it), refuse it on their very next request once `provider token revoke` has run,
/// with no wait; a token issued meanwhile is accepted by both at once.
struct APITokenCacheScenario {
    let deployment: TemporaryDeployment
    let stores: [ServiceProcess]

    init(database: String?) throws {
        let deployment = try TemporaryDeployment(database: database)
        self.deployment = deployment
        try deployment.addUser("alice", password: "alice-pw")
        let nowhere = try freeLoopbackPort()
        stores = try (0..<2).map { _ in
            try ServiceProcess(["store", "--data-dir", deployment.directory, "--gateway", "127.0.0.1:\(nowhere)", "--http", "127.0.0.1:0",
                                "--loops", "1"])
        }
    }

    func stop() { for store in stores { _ = store.terminate() } }

    func token(_ provider: String) throws -> String {
        let made = try SecurePushBinary.run(["provider", "token", "create", provider, "--data-dir", deployment.directory])
        guard made.status == 0 else { throw ServiceError.failed(made.stderr) }
        return made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func revokedOnTheNextRequest() throws {
        let billing = try token("billing")
        let http = try stores.map { try HTTPTestConnection(port: try #require($0.announcedHTTPPort)) }
        let json = #"{"recipient":"alice","text":"paid"}"#
        // Twice at each store: the first reads the token's row and keeps it, the second is
        // served from what was kept.
        for connection in http {
            for _ in 0..<2 {
                let sent = try connection.post("/v1/messages", json: json, token: billing)
                #expect(sent.status == 201, "\(sent.text)")
            }
        }
        let crm = try token("crm")
        for connection in http {
            let sent = try connection.post("/v1/messages", json: json, token: crm)
            #expect(sent.status == 201, "a token issued meanwhile is accepted at once: \(sent.text)")
            // Kept again since the cursor moved, so that what follows is served from memory.
            let again = try connection.post("/v1/messages", json: json, token: billing)
            #expect(again.status == 201, "\(again.text)")
        }
        let id = String(billing.split(separator: "_")[1])
        let revoked = try SecurePushBinary.run(["provider", "token", "revoke", id, "--data-dir", deployment.directory])
        #expect(revoked.status == 0, "\(revoked.stderr)")
        for connection in http {
            let refused = try connection.post("/v1/messages", json: json, token: billing)
            #expect(refused.status == 401, "the very next request after the revocation: \(refused.text)")
            let other = try connection.post("/v1/messages", json: json, token: crm)
            #expect(other.status == 201, "another token stays good: \(other.text)")
        }
    }
}

@Suite("HTTP API tokens cached per store, revoked at once (SQLite)", .ownThread, .serialized)
struct APITokenCacheProcessTests {
    @Test("two stores on one SQLite file keep a token they accepted and refuse it on their very next request once it is revoked")
    func sqlite() throws {
        let scenario = try APITokenCacheScenario(database: nil)
        defer { scenario.stop() }
        try scenario.revokedOnTheNextRequest()
    }
}

@Suite("HTTP API tokens cached per store, revoked at once (PostgreSQL)", .ownThread, .serialized, .enabled(if: PostgresCluster.testsEnabled))
struct PostgresAPITokenCacheProcessTests {
    @Test("two stores on one PostgreSQL database keep a token they accepted and refuse it on their very next request once it is revoked")
    func postgres() throws {
        let scenario = try APITokenCacheScenario(database: try PostgresCluster.shared().createDatabase())
        defer { scenario.stop() }
        try scenario.revokedOnTheNextRequest()
    }
}
