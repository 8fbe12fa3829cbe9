import Foundation
import PushEventLoop
@testable import PushStore
@testable import PushStoreLogic
@testable import PushStoreSQLite
import PushTestSupport
import PushWire
import Testing

@Suite("Provider API tokens", .ownThread)
struct APITokenTests {
    @Test("a minted token parses back to its id and secret, which its record accepts")
    func roundTrip() throws {
        let minted = try APIToken.mint(provider: "billing", nowMs: 1_234)
        #expect(minted.text.utf8.count == APIToken.textLength && minted.text.hasPrefix("sp_"))
        let parsed = try #require(APIToken.parse(minted.text))
        #expect(parsed.id == minted.record.id && APIToken.isValidID(parsed.id))
        #expect(parsed.secret.count == 32)
        #expect(minted.record.provider == "billing" && minted.record.createdAt == 1_234 && minted.record.revokedAt == nil)
        #expect(minted.record.secretHash.count == 32 && minted.record.secretHash != parsed.secret, "the record keeps a hash, not the secret")
        #expect(!minted.text.contains(minted.record.secretHash.map { String($0) }.joined()))
        #expect(APIToken.accepts(parsed.secret, minted.record))
        let other = try APIToken.mint(provider: "billing", nowMs: 1_234)
        #expect(other.record.id != minted.record.id && other.text != minted.text)
    }

    @Test("a wrong secret, or a revoked record, is refused")
    func refusals() throws {
        let minted = try APIToken.mint(provider: "billing", nowMs: 1)
        let secret = try #require(APIToken.parse(minted.text)).secret
        var wrong = secret
        wrong[31] ^= 1
        #expect(!APIToken.accepts(wrong, minted.record))
        #expect(!APIToken.accepts([], minted.record))
        #expect(!APIToken.accepts(secret + [0], minted.record))
        var revoked = minted.record
        revoked.revokedAt = 2
        #expect(!APIToken.accepts(secret, revoked))
        var noHash = minted.record
        noHash.secretHash = []
        #expect(!APIToken.accepts(secret, noHash))
    }

    @Test("texts not of the token's shape parse to nil")
    func malformed() throws {
        let good = try APIToken.mint(provider: "p", nowMs: 1).text
        let id = String(good.dropFirst(3).prefix(12))
        let secret = String(good.suffix(43))
        let head = "sp_" + id + "_"
        let noLast = String(secret.dropLast())
        var texts: [String] = ["", "sp_", "sp__", "Bearer " + good, " " + good, good + " ", good + "\n"]
        texts += ["xp_" + id + "_" + secret, "SP_" + id + "_" + secret, "sp-" + id + "_" + secret]
        texts += ["sp_0123456789AB_" + secret, "sp_0123456789aG_" + secret, "sp_0123456789a_" + secret + "A", "sp_0123456789abc" + secret]
        texts += [head + noLast, head + secret + "A", head + secret + "=", head + noLast + "+", head + noLast + "/"]
        texts.append(head + noLast + "B")  // unused low bits set: not the canonical text
        texts += [head + secret + "_extra", "sp_" + id + "_x_" + secret, "sp_" + id + secret]
        texts.append(head + String(repeating: "A", count: 42) + "é")
        texts.append(head + secret + String(repeating: "A", count: 1_000_000))
        texts.append(String(repeating: "sp_", count: 100_000))
        for text in texts {
            #expect(APIToken.parse(text) == nil, "\(text.prefix(80))")
        }
        #expect(APIToken.parse("sp_" + id + "_" + secret) != nil)
        #expect(APIToken.parse("sp_0123456789ab_" + String(repeating: "A", count: 43))?.secret == [UInt8](repeating: 0, count: 32))
    }

    @Test("provider names: 1 to 64 letters, digits, '-', '_', '.'")
    func providerNames() {
        for name in ["a", "billing", "Billing-2.eu_west", String(repeating: "x", count: 64)] {
            #expect(APIToken.isValidProviderName(name), "\(name)")
        }
        for name in ["", " ", "a b", "a/b", "é", "a\n", "a:b", String(repeating: "x", count: 65)] {
            #expect(!APIToken.isValidProviderName(name), "\(name)")
        }
        #expect(throws: APITokenError.invalidProviderName("a b")) { try APIToken.mint(provider: "a b", nowMs: 1) }
    }

    @Test("base64url without padding round-trips every length and refuses other alphabets")
    func base64url() {
        for count in 0...40 {
            let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 250) }
            let text = Base64URL.encode(bytes)
            #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
            #expect(Base64URL.decode(Array(text.utf8)[...]) == bytes)
        }
        #expect(Base64URL.encode(Array("foobar".utf8)) == "Zm9vYmFy")
        #expect(Base64URL.encode([0xFB, 0xFF]) == "-_8")
        #expect(Base64URL.decode(Array("Zg==".utf8)[...]) == nil)
        #expect(Base64URL.decode(Array("Z".utf8)[...]) == nil)
    }
}

@Suite("Provider API tokens on SQLite", .ownThread)
struct SQLiteAPITokenTests {
    /// The store's read of `id` through a SQLite backend on the database, as a request makes it.
    private func read(_ id: String, path: String, alsoUser: String? = nil) throws -> StoreReadResult {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let backend = try SQLiteStoreBackend.start(path: path, settings: StoreSettings(), clock: { 1 }, on: loop)
        defer { backend.stop() }
        let result = try #require(backend.readNow(StoreReads(user: alsoUser, apiToken: id, apiTokensRevision: true)))
        return try result.get()
    }

    @Test("created, read by the store with its other keys, listed, revoked (read then with revokedAt), revoked again")
    func lifecycle() throws {
        let scratch = try ScratchDatabase("api-tokens")
        let tokens = try APITokenAdministration(databasePath: scratch.path)
        _ = try UserAdministration(databasePath: scratch.path).add("alice", passwordHash: "h", nowMs: 1)
        let created = try tokens.create(provider: "billing", nowMs: 1_000)
        let second = try tokens.create(provider: "crm", nowMs: 2_000)
        let parsed = try #require(APIToken.parse(created.text))

        let found = try read(parsed.id, path: scratch.path, alsoUser: "alice")
        #expect(found.apiToken == created.record)
        #expect(found.apiTokensRevision == 2, "each issue advances the tokens' cursor")
        #expect(found.user?.name == "alice")
        #expect(APIToken.accepts(parsed.secret, try #require(found.apiToken)))
        #expect(try read("0123456789ab", path: scratch.path).apiToken == nil, "an unknown id")
        #expect(try scratch.integer("SELECT count(*) FROM api_tokens WHERE secret_hash = x'\(parsed.secret.hexString)'") == 0)

        #expect(try tokens.list().map(\.id) == [created.record.id, second.record.id])
        #expect(try tokens.list().allSatisfy { $0.secretHash.isEmpty && $0.revokedAt == nil })

        let revoked = try tokens.revoke(id: created.record.id, nowMs: 3_000)
        var expected = created.record
        expected.revokedAt = 3_000
        #expect(revoked == .revoked(expected))
        #expect(try read(parsed.id, path: scratch.path).apiTokensRevision == 3, "a revocation advances it")
        let after = try #require(try read(parsed.id, path: scratch.path).apiToken)
        #expect(after == expected)
        #expect(!APIToken.accepts(parsed.secret, after))
        #expect(try tokens.revoke(id: created.record.id, nowMs: 4_000) == .alreadyRevoked(expected), "revoking again changes nothing")
        #expect(try tokens.list().map(\.revokedAt) == [3_000, nil])

        #expect(throws: APITokenError.unknownID("0123456789ab")) { try tokens.revoke(id: "0123456789ab", nowMs: 1) }
        #expect(throws: APITokenError.unknownID("nonsense")) { try tokens.revoke(id: "nonsense", nowMs: 1) }
        #expect(throws: APITokenError.invalidProviderName("")) { try tokens.create(provider: "", nowMs: 1) }
        #expect(try tokens.list().count == 2)
    }
}

extension SchemaMigrationTests {
    @Test("version 4 to 5: the API tokens table appears, empty, next to what a version-4 build left")
    func addsAPITokens() throws {
        let scratch = try ScratchDatabase()
        let old = try SQLiteConnection(path: scratch.path)
        try old.execute([SQLiteSchema.usersTable("users"), SQLiteSchema.payloadsTable("payloads"), SQLiteSchema.receiptsTable,
                         SQLiteSchema.metaAndTriggers, SQLiteSchema.indexes, RegistryTable.schema, SQLiteSchema.pushesTable,
                         SQLiteSchema.idempotencyTable].joined(separator: ";\n"))
        try old.execute("""
            INSERT INTO users (id, name, password_hash, created_at) VALUES (42, 'alice', 'h', 1000);
            INSERT INTO payloads (seq, id_high, id_low, user_id, key_id, body, created_at, expires_at, read_limit)
                VALUES (3, 1, 2, 42, NULL, NULL, 0, 9999999999999, 0);
            PRAGMA user_version = 4;
            """)
        old.close()
        let tokens = try APITokenAdministration(databasePath: scratch.path)
        #expect(try scratch.integer("PRAGMA user_version") == SQLiteSchema.currentVersion)
        #expect(try tokens.list().isEmpty)
        let reader = try SQLitePayloadReader(path: scratch.path)
        #expect(try reader.user(named: "alice")?.id == 42)
        #expect(try reader.payload(sequence: 3)?.userID == 42)
        let created = try tokens.create(provider: "billing", nowMs: 7)
        #expect(try reader.apiToken(id: created.record.id) == created.record)
    }
}

@Suite("API token scopes", .ownThread)
struct APITokenScopeTests {
    @Test("scopes round-trip through their stored text; unknown names, empty lists and stray commas are refused")
    func scopesParse() {
        #expect(APITokenScopes.all.description == "send,status,recall,keys")
        #expect(APITokenScopes(names: "send,status,recall,keys") == .all)
        #expect(APITokenScopes(names: "keys") == .keys)
        #expect(APITokenScopes(names: "send") == .send)
        #expect(APITokenScopes(names: "recall, send") == [.send, .recall])
        #expect(APITokenScopes(names: APITokenScopes([.status, .recall]).description) == [.status, .recall])
        for bad in ["", "write", "send,", ",send", "send,,status", "SEND"] {
            #expect(APITokenScopes(names: bad) == nil, "\(bad)")
        }
    }

    @Test("the scope keys joins the default of new tokens; a token stored before it, \"send,status,recall\", keeps those three and no more")
    func keysScopeIsNewTokensOnly() throws {
        #expect(APITokenScopes(names: "send,status,recall") == [.send, .status, .recall])
        #expect(APITokenScopes(names: "send,status,recall")?.contains(.keys) == false)
        #expect(APITokenScopes.messages == [.send, .status, .recall])
        let deployment = try TemporaryDeployment()
        let tokens = try APITokenAdministration(databasePath: StoreFiles.databasePath(deployment.directory))
        #expect(try tokens.create(provider: "new", nowMs: 1_000).record.scopes.contains(.keys))
        let older = try tokens.create(provider: "older", scopes: .messages, nowMs: 1_000)
        #expect(try tokens.list().first { $0.id == older.record.id }?.scopes == [.send, .status, .recall])
    }

    @Test("a token minted with scopes keeps them, on SQLite through the store's read path")
    func scopesAreStored() throws {
        let deployment = try TemporaryDeployment()
        let tokens = try APITokenAdministration(databasePath: StoreFiles.databasePath(deployment.directory))
        let created = try tokens.create(provider: "sender", scopes: .send, nowMs: 1_000)
        #expect(created.record.scopes == .send)
        #expect(try tokens.list().first?.scopes == .send)
    }
}
