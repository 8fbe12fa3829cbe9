import Foundation
import PushEventLoop
import PushPostgres
@testable import PushStore
@testable import PushStoreLogic
@testable import PushStorePostgres
@testable import PushStoreSQLite
import PushTestSupport
import PushWire
import Testing

@Suite("Provider API tokens on PostgreSQL", .ownThread, .serialized, .enabled(if: PostgresCluster.testsEnabled))
struct PostgresAPITokenTests {
    /// `reads` as a store on the database reads them: through its backend, on a loop of its own.
    private func read(_ reads: StoreReads, _ database: PostgresDeployment) throws -> StoreReadResult {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let keys = StoreFiles.dataKeysPath(forDatabase: StoreFiles.databasePath(database.deployment.directory))
        let backend = try PostgresStoreBackend.start(url: database.url, settings: StoreSettings(), dataKeysPath: keys, clock: { 1 },
                                                     logger: .silent("securepush.store"), on: loop)
        defer { backend.stop() }
        var answer: Result<StoreReadResult, StoreBackendError>?
        loop.schedule(after: .zero) { backend.read(reads) { answer = $0 } }
        guard loop.run(until: { answer != nil }, timeoutSeconds: 15), let answer else { throw ServiceError.failed("the read was not answered") }
        return try answer.get()
    }

    @Test("created, read by a store in the same statement as its other keys, listed, revoked (read then with revokedAt), revoked again")
    func lifecycle() async throws {
        try await onOwnThread {
            let database = try PostgresDeployment()
            let tokens = database.admin.apiTokens
            let created = try tokens.create(provider: "billing", nowMs: 1_000)
            let second = try tokens.create(provider: "crm", nowMs: 2_000)
            let parsed = try #require(APIToken.parse(created.text))

            let found = try read(StoreReads(user: "alice", apiToken: parsed.id), database)
            #expect(found.apiToken == created.record)
            #expect(found.user?.name == "alice")
            #expect(APIToken.accepts(parsed.secret, try #require(found.apiToken)))
            #expect(try read(StoreReads(apiToken: "0123456789ab"), database).apiToken == nil, "an unknown id")
            let withPayload = try read(StoreReads(payload: PayloadID.random(), apiToken: parsed.id), database)
            #expect(withPayload.apiToken == created.record && withPayload.payload == nil, "a payload read asked with a token is not batched")
            // The tokens' cursor rides in the statement of a keyed SEND's read: two issues so far.
            let key = IdempotencyKey(scope: "api:billing", key: "k-1")
            let keyed = try read(StoreReads(idempotency: key, apiTokensRevision: true), database)
            #expect(keyed.apiTokensRevision == 2 && keyed.idempotency == nil && keyed.apiToken == nil)

            #expect(try tokens.list().map(\.id) == [created.record.id, second.record.id])
            #expect(try tokens.list().allSatisfy { $0.secretHash.isEmpty && $0.revokedAt == nil })

            var expected = created.record
            expected.revokedAt = 3_000
            #expect(try tokens.revoke(id: created.record.id, nowMs: 3_000) == .revoked(expected))
            let after = try #require(try read(StoreReads(apiToken: parsed.id), database).apiToken)
            #expect(after == expected && !APIToken.accepts(parsed.secret, after))
            #expect(try read(StoreReads(apiTokensRevision: true), database).apiTokensRevision == 3, "a revocation advances the cursor")
            #expect(try tokens.revoke(id: created.record.id, nowMs: 4_000) == .alreadyRevoked(expected))
            #expect(try tokens.list().map(\.revokedAt) == [3_000, nil])
            #expect(throws: APITokenError.unknownID("0123456789ab")) { try tokens.revoke(id: "0123456789ab", nowMs: 1) }
            #expect(throws: APITokenError.invalidProviderName("no spaces")) { try tokens.create(provider: "no spaces", nowMs: 1) }
            #expect(try database.sql("SELECT count(*) FROM api_tokens").int64(0, 0) == 2)
        }
    }

    @Test("version 3 to 4: the API tokens table appears, empty, next to what a version-3 build left")
    func migratesFromVersion3() async throws {
        try await onOwnThread {
            let url = try PostgresCluster.shared().createDatabase()
            let old = try PostgresBlockingConnection(url)
            defer { old.close() }
            try old.execute("CREATE TABLE schema_version (version bigint PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")
            for (version, sql) in PostgresSchema.migrations where version <= 3 {
                try old.execute(sql)
                _ = try old.query("INSERT INTO schema_version (version) VALUES ($1)", [.int64(version)])
            }
            _ = try old.query("INSERT INTO users (id, name, password_hash, created_at) VALUES (42, 'alice', 'h', 1000)")
            #expect(try PostgresSchema.version(on: old) == 3)

            let admin = try PostgresAdministration(url: url)
            #expect(try PostgresSchema.version(on: old) == PostgresSchema.currentVersion)
            #expect(try admin.list(nowMs: 1).map(\.name) == ["alice"])
            #expect(try admin.apiTokens.list().isEmpty)
            let created = try admin.apiTokens.create(provider: "billing", nowMs: 5)
            #expect(try admin.apiTokens.list().map(\.id) == [created.record.id])
        }
    }

    @Test("securepush provider token create, list and revoke on a deployment whose store uses PostgreSQL")
    func commandLine() async throws {
        try await onOwnThread {
            let url = try PostgresCluster.shared().createDatabase()
            let deployment = try TemporaryDeployment(commandLine: true, database: url)
            let created = try SecurePushBinary.run(["provider", "token", "create", "billing", "--data-dir", deployment.directory])
            #expect(created.status == 0, "\(created.stderr)")
            let token = created.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            let parsed = try #require(APIToken.parse(token))
            let list = try SecurePushBinary.run(["provider", "token", "list", "--data-dir", deployment.directory])
            #expect(list.status == 0 && list.stdout.contains(parsed.id) && list.stdout.contains("active"))
            let revoked = try SecurePushBinary.run(["provider", "token", "revoke", parsed.id, "--data-dir", deployment.directory])
            #expect(revoked.status == 0 && revoked.stdout.contains("revoked API token \(parsed.id)"))
            let record = try #require(try PostgresAdministration(url: url).apiTokens.list().first)
            #expect(record.id == parsed.id && record.revokedAt != nil)
        }
    }
}

extension PostgresAPITokenTests {
    @Test("version 6 to 7: payloads gain a sender; a row from before keeps none")
    func addsSenders() async throws {
        try await onOwnThread {
            let url = try PostgresCluster.shared().createDatabase()
            let old = try PostgresBlockingConnection(url)
            defer { old.close() }
            try old.execute("CREATE TABLE schema_version (version bigint PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")
            for (version, sql) in PostgresSchema.migrations where version <= 6 {
                try old.execute(sql)
                _ = try old.query("INSERT INTO schema_version (version) VALUES ($1)", [.int64(version)])
            }
            _ = try old.query("INSERT INTO users (id, name, password_hash, created_at) VALUES (42, 'alice', 'h', 1000)")
            _ = try old.query("""
                INSERT INTO payloads (id, user_id, key_id, body, created_at, expires_at, read_limit) VALUES ($1, 42, NULL, NULL, 0, 9999999999999, 0)
                """, [.bytes(PayloadID(high: 1, low: 2).bytes)])
            _ = try PostgresAdministration(url: url)
            #expect(try PostgresSchema.version(on: old) == PostgresSchema.currentVersion)
            #expect(try old.query("SELECT count(*) FROM payloads WHERE sender IS NULL").int64(0, 0) == 1)
        }
    }
}
