import Foundation
@testable import PushStoreLogic
@testable import PushStoreSQLite
import Testing
import PushWire
@testable import PushStore

/// Whose payloads a provider's STATUS and RECALL see, as the logic decides it (SPEC.md
/// 4.11-3, 4.12-3, 4.12-4), over a real SQLite file.
@Suite("Provider scope of STATUS and RECALL")
struct ProviderScopeLogicTests {
    func session(_ store: StoreFixture, _ provider: ProviderIdentity) -> StoreSession {
        StoreSession(peerAddress: "127.0.0.1", role: .provider, provider: provider)
    }

    @Test("[4.11-3] [4.12-3] another provider's STATUS and RECALL get the very reply an unknown id gets, and change nothing; the sender's own still work")
    func othersGetNotFound() throws {
        let store = try StoreFixture()
        let id = try store.store("for the key's holders")
        let crm = session(store, ProviderIdentity(name: "crm"))
        let unknown = PayloadID.random()
        let refused = try store.send(.status(StatusRequest(id: id)), on: crm)
        #expect(status(of: refused) == .notFound)
        #expect(try Self.encoded(refused) == (Self.encoded(store.send(.status(StatusRequest(id: unknown)), on: crm))))
        let recall = try store.send(.recall(Recall(id: id)), on: crm)
        #expect(status(of: recall) == .notFound)
        #expect(try Self.encoded(recall) == (Self.encoded(store.send(.recall(Recall(id: unknown)), on: crm))))

        guard case .fetchOK(let fetched)? = try store.send(.fetch(Fetch(id: id, token: try store.token())), on: store.session(.device)) else {
            Issue.record("the recipient could not read it after another provider's RECALL"); return
        }
        #expect(fetched.payload == Array("for the key's holders".utf8))
        let own = store.session(.provider)
        guard case .statusOK(let ok)? = try store.send(.status(StatusRequest(id: id)), on: own) else { Issue.record("own STATUS"); return }
        #expect(ok.state == .fetched)
        #expect(try store.send(.recall(Recall(id: id)), on: own) == .recallOK(RecallOK(id: id)))
        #expect(status(of: try store.send(.status(StatusRequest(id: id)), on: crm)) == .notFound, "gone, and still not crm's")
    }

    @Test("[4.12-3] SEND records its provider too; [4.12-4] a token for provider-key is the key's holders, any-provider sees every sender")
    func sendersAndScopes() throws {
        var settings = StoreSettings()
        settings.forwardsPushes = true
        let store = try StoreFixture(settings: settings)
        let billing = session(store, ProviderIdentity(name: "billing"))
        guard case .sendOK(let sent)? = try store.send(.send(SendRequest(user: "alice", payload: [1])), on: billing) else {
            Issue.record("SEND failed"); return
        }
        #expect(try store.locate(sent.id)?.sender == "billing")
        let keyID = try store.store("by the key's holders")
        #expect(try store.locate(keyID)?.sender == "provider-key")

        let record = APITokenRecord(id: "0123456789ab", provider: "provider-key", secretHash: [], createdAt: 0)
        let keyHoldersToken = session(store, ProviderIdentity(apiToken: record))
        #expect(ProviderIdentity(apiToken: record) == .keyHolders)
        #expect(ProviderIdentity(apiToken: record).idempotencyScope == IdempotencyKey.providerScope, "one provider, one set of keys")
        #expect(ProviderIdentity(name: "billing").idempotencyScope == "api:billing")
        if case .statusOK? = try store.send(.status(StatusRequest(id: keyID)), on: keyHoldersToken) {} else { Issue.record("provider-key's token") }
        #expect(status(of: try store.send(.status(StatusRequest(id: sent.id)), on: keyHoldersToken)) == .notFound)
        #expect(status(of: try store.send(.status(StatusRequest(id: keyID)), on: billing)) == .notFound)

        var operatorRecord = record
        operatorRecord.provider = "audit"
        operatorRecord.scopes = [.status, .recall, .anyProvider]
        let audit = session(store, ProviderIdentity(apiToken: operatorRecord))
        for id in [sent.id, keyID] {
            if case .statusOK? = try store.send(.status(StatusRequest(id: id)), on: audit) {} else { Issue.record("any-provider saw \(id.hex) not") }
            #expect(try store.send(.recall(Recall(id: id)), on: audit) == .recallOK(RecallOK(id: id)))
        }
    }

    @Test("[4.12-3] a payload stored before senders were recorded (no sender) is any provider's, as it was")
    func payloadsWithoutSender() throws {
        let store = try StoreFixture()
        let id = try store.store("from before")
        let connection = try SQLiteConnection(path: store.directory.appendingPathComponent(SQLitePayloadDatabase.fileName).path)
        try connection.execute("UPDATE payloads SET sender = NULL")
        connection.close()
        #expect(try store.locate(id)?.sender == nil)
        let crm = session(store, ProviderIdentity(name: "crm"))
        if case .statusOK? = try store.send(.status(StatusRequest(id: id)), on: crm) {} else { Issue.record("no sender: any provider's") }
        #expect(try store.send(.recall(Recall(id: id)), on: crm) == .recallOK(RecallOK(id: id)))
    }

    @Test("any-provider round-trips through the stored text and is not in the default")
    func scopeText() {
        #expect(APITokenScopes(names: "status,any-provider") == [.status, .anyProvider])
        #expect(APITokenScopes([.send, .status, .recall, .anyProvider]).description == "send,status,recall,any-provider")
        #expect(!APITokenScopes.all.contains(.anyProvider))
    }

    static func encoded(_ message: Message?) -> [UInt8] {
        var bytes: [UInt8] = []
        message?.encode(correlation: 1, into: &bytes)
        return bytes
    }
}

extension SchemaMigrationTests {
    @Test("version 5 to 6: payloads gain a sender; rows from before keep none, a new row records its provider")
    func addsSenders() throws {
        let scratch = try ScratchDatabase()
        let old = try SQLiteConnection(path: scratch.path)
        try old.execute([SQLiteSchema.usersTable("users"), SQLiteSchema.payloadsTable("payloads"), SQLiteSchema.receiptsTable,
                         SQLiteSchema.metaAndTriggers, SQLiteSchema.indexes, RegistryTable.schema, SQLiteSchema.pushesTable,
                         SQLiteSchema.idempotencyTable, APITokenTable.schema].joined(separator: ";\n"))
        try old.execute("""
            INSERT INTO users (id, name, password_hash, created_at) VALUES (42, 'alice', 'h', 1000);
            INSERT INTO payloads (seq, id_high, id_low, user_id, key_id, body, created_at, expires_at, read_limit)
                VALUES (3, 1, 2, 42, NULL, NULL, 0, 9999999999999, 0);
            PRAGMA user_version = 5;
            """)
        old.close()
        let writer = try SQLitePayloadWriter(path: scratch.path)
        #expect(try scratch.integer("PRAGMA user_version") == SQLiteSchema.currentVersion)
        let reader = try SQLitePayloadReader(path: scratch.path)
        let before = try #require(try reader.payload(sequence: 3))
        #expect(before.userID == 42 && before.sender == nil)
        let outcome = try writer.commit([.store(NewPayload(id: PayloadID(high: 5, low: 5), user: "alice", body: [1], createdAt: 1,
                                                           expiresAt: 9_999_999_999_999, readLimit: 0, sender: "billing"))])
        guard case .stored(let sequence, _) = outcome.first else { Issue.record("\(outcome)"); return }
        #expect(try reader.payload(sequence: sequence, withBody: false)?.sender == "billing")
    }
}
