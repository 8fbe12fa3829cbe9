import Foundation
import PushPostgres
import PushSecurity
@testable import PushStore
@testable import PushStoreLogic
@testable import PushStorePostgres
import PushTestSupport
import PushWire
import Testing

/// Data-key rotation on PostgreSQL: the keys live in the database, wrapped under the
/// deployment's data-keys file, so a key added from one host's directory reaches every
/// store; re-sealing and pruning are safe beside running stores.
@Suite("Data keys on PostgreSQL", .ownThread, .serialized, .enabled(if: PostgresCluster.testsEnabled))
struct PostgresDataKeyTests {
    /// A database with alice and bob, and a second host's copy of the deployment directory
    /// (its data-keys file made first, so both hosts hold the same one).
    private func twoHosts() throws -> (PostgresDeployment, TemporaryDeployment) {
        let database = try PostgresDeployment()
        _ = try DataKeyFile.readOrCreate(DataKeyFile.path(inDirectory: database.deployment.directory))
        return (database, try TemporaryDeployment(copying: database.deployment))
    }

    private func keys(_ host: TemporaryDeployment, _ database: PostgresDeployment) throws -> PostgresDataKeyAdministration {
        try PostgresDataKeyAdministration(url: database.url, dataKeysPath: DataKeyFile.path(inDirectory: host.directory))
    }

    private func keyID(of id: PayloadID, _ database: PostgresDeployment) throws -> Int64? {
        let row = try database.sql("SELECT key_id FROM payloads WHERE id = $1", [.bytes(id.bytes)])
        return row.rows.isEmpty || row.isNull(0, 0) ? nil : try row.int64(0, 0)
    }

    private func fetches(_ ids: [PayloadID], at store: PostgresStoreClient) throws -> Bool {
        let token = try store.token()
        let device = try store.device()
        return try ids.allSatisfy { id in
            guard case .fetchOK(let fetched) = try device.request(.fetch(Fetch(id: id, token: token))) else { return false }
            return String(decoding: fetched.payload, as: UTF8.self).hasPrefix("before ")
        }
    }

    @Test("key rotate on one host's directory: both stores seal under the new key, none before its activation, older payloads are re-sealed, key prune removes the old key, and everything still fetches at both")
    func rotationAcrossTwoStores() async throws {
        try await onOwnThread {
            let (database, hostB) = try twoHosts()
            let a = database.client(try database.startStore())
            let b = PostgresStoreClient(database: database, service: try InProcessStore(hostB) { $0.database = database.url })
            var before: [PayloadID] = []
            for index in 0..<300 { before.append(try (index % 2 == 0 ? a : b).store("before \(index)")) }
            #expect(try database.sql("SELECT count(*) FROM payloads WHERE key_id = 1").int64(0, 0) == 300)

            let admin = try keys(hostB, database)
            let rotated = try admin.rotate()
            #expect(rotated == DataKeyRotation(keyID: 2, sealsInMs: PostgresDataKeys.activationDelayMs))
            #expect(try admin.usage().map(\.isCurrent) == [true, false], "key 2 does not seal before every store has read it")

            for store in [a, b] {
                #expect(waitUntil(timeoutSeconds: 10, pollMilliseconds: 50) {
                    (try? keyID(of: store.store("after"), database)) == 2
                })
            }
            // What the delay is for: nothing is sealed under key 2 before its activation,
            // when every store has had a refresh to read it. (Re-sealing, which moves older
            // payloads to key 2, starts only 5 s after the activation.)
            let early = try database.sql(
                "SELECT count(*) FROM payloads WHERE key_id = 2 AND created_at < (SELECT active_at FROM data_keys WHERE id = 2)"
            ).int64(0, 0)
            #expect(early == 0, "\(early) payloads sealed under key 2 before it was active")

            #expect(waitUntil(timeoutSeconds: 20, pollMilliseconds: 100) {
                (try? database.sql("SELECT count(*) FROM payloads WHERE key_id = 1").int64(0, 0)) == 0
            }, "a store re-sealed the older payloads")
            // The pass writes its marker after its last batch.
            #expect(waitUntil(timeoutSeconds: 5) { (try? database.sql("SELECT key_id FROM data_key_reseal").int64(0, 0)) == 2 })
            #expect(PostgresResealer.marker(held: 2, finished: 1) == 2, "a pass for an older key never moves the marker back")
            #expect(try admin.usage().filter { $0.keyID == 1 }.map(\.rows) == [0])

            let pruner = try keys(database.deployment, database)
            #expect(try pruner.prune() == [1])
            #expect(try pruner.usage().map(\.keyID) == [2])
            #expect(try fetches(before, at: a) && fetches(before, at: b), "every payload opens at both stores")
            #expect(try keyID(of: a.store("later"), database) == 2 && keyID(of: b.store("later"), database) == 2)
        }
    }

    @Test("prune never removes the current key, a key a row uses, or one superseded less than the settle time ago; the foreign key refuses what the count would miss")
    func pruneSafety() async throws {
        try await onOwnThread {
            let database = try PostgresDeployment()
            let store = database.client(try database.startStore())
            let kept = try store.store("before 1")
            let admin = try keys(database.deployment, database)
            _ = try admin.rotate()
            #expect(try admin.prune() == [], "key 1 is current, key 2 is not sealing yet")
            #expect(waitUntil(timeoutSeconds: 5, pollMilliseconds: 50) { (try? admin.usage().last?.isCurrent) == true })
            #expect(try admin.prune() == [], "a row is under key 1")
            #expect(try admin.resealAll() == 0)
            #expect(try keyID(of: kept, database) == 2)
            #expect(try admin.prune() == [], "key 1 was superseded less than \(PostgresDataKeys.settleMs) ms ago: a store may still seal under it")

            // A row sealed under key 1 by a store that had not yet read key 2: its count is
            // not seen by a prune that counted just before, but the foreign key refuses.
            let stale = try store.store("before 2")
            _ = try database.sql("UPDATE payloads SET key_id = 1 WHERE id = $1", [.bytes(stale.bytes)])
            let connection = try PostgresBlockingConnection(database.url)
            defer { connection.close() }
            #expect(try PostgresDataKeys.remove(1, settleMs: 0, on: connection) == false, "the foreign key refuses")
            #expect(try PostgresDataKeys.remove(2, settleMs: 0, on: connection) == false, "never the current key")
            _ = try database.sql("DELETE FROM payloads WHERE id = $1", [.bytes(stale.bytes)])
            #expect(try PostgresDataKeys.remove(1, settleMs: 0, on: connection) == true)
            #expect(throws: PostgresError.self, "nothing goes in under a removed key") {
                try database.sql("UPDATE payloads SET key_id = 1 WHERE id = $1", [.bytes(kept.bytes)])
            }
            #expect(try fetches([kept], at: store))
        }
    }

    @Test("a re-sealing batch leaves a row erased or deleted after it was read as it is")
    func resealKeepsConcurrentErasure() async throws {
        try await onOwnThread {
            let database = try PostgresDeployment()
            let store = database.client(try database.startStore())
            let ids = try (0..<3).map { try store.store("before \($0)") }
            let admin = try keys(database.deployment, database)
            _ = try admin.rotate()
            #expect(waitUntil(timeoutSeconds: 5, pollMilliseconds: 50) { (try? admin.usage().last?.isCurrent) == true })
            let connection = try PostgresBlockingConnection(database.url)
            defer { connection.close() }
            let fileKeys = try DataKeyFile.read(DataKeyFile.path(inDirectory: database.deployment.directory))
            let loaded = try PostgresDataKeys.load(fileKeys: fileKeys, on: connection)
            let sealer = PayloadSealer(ring: try DataKeyRing(keys: loaded.keys, current: 2))
            let select = PostgresResealer.select(after: 0, below: 2)
            let read = try PostgresResealer.decode(connection.query(select.sql, select.parameters))
            #expect(read.count == 3)
            // Between the read and the write: one payload recalled (body erased), one deleted.
            #expect(try store.provider().request(.recall(Recall(id: ids[0]))).type == .recallOK)
            _ = try database.sql("DELETE FROM payloads WHERE id = $1", [.bytes(ids[1].bytes)])
            let update = PostgresResealer.update(PostgresResealer.reseal(read, with: sealer).0)
            #expect(try connection.query(update.sql, update.parameters).affectedRows == 1)
            let recalled = try database.sql("SELECT key_id, body FROM payloads WHERE id = $1", [.bytes(ids[0].bytes)])
            #expect(recalled.isNull(0, 0) && recalled.isNull(0, 1), "the recalled body stays erased")
            #expect(try database.sql("SELECT count(*) FROM payloads").int64(0, 0) == 2, "the deleted row stays deleted")
            #expect(try keyID(of: ids[2], database) == 2)
            #expect(try fetches([ids[2]], at: store))
        }
    }

    @Test("a host whose data-keys file is not the deployment's is refused by the store and the key commands, saying so")
    func foreignDataKeysFile() async throws {
        try await onOwnThread {
            let database = try PostgresDeployment()
            _ = try keys(database.deployment, database)
            let other = try TemporaryDeployment()
            _ = try DataKeyFile.readOrCreate(DataKeyFile.path(inDirectory: other.directory))
            #expect(throws: (any Error).self) { try InProcessStore(other) { $0.database = database.url } }
            do {
                _ = try keys(other, database)
                Issue.record("opened the keys with another file")
            } catch {
                #expect("\(error)".contains("differs from the deployment's"), "\(error)")
            }
        }
    }

    @Test("a database from before the keys table: migrating without the keys leaves an earlier build's STOREs going in; the first store imports the file's key and links the payloads to it; what was sealed before still opens")
    func upgradeFromFileKeys() async throws {
        try await onOwnThread {
            let url = try PostgresCluster.shared().createDatabase()
            let old = try PostgresBlockingConnection(url)
            defer { old.close() }
            try old.execute("CREATE TABLE schema_version (version bigint PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")
            for (version, sql) in PostgresSchema.migrations where version <= 5 {
                try old.execute(sql)
                _ = try old.query("INSERT INTO schema_version (version) VALUES ($1)", [.int64(version)])
            }
            let deployment = try TemporaryDeployment(database: url)
            let hash = try PasswordHash.make(password: Array("alice-pw".utf8), iterations: 1000)
            _ = try old.query("INSERT INTO users (id, name, password_hash, created_at) VALUES (42, 'alice', $1, 1000)", [.text(hash.encoded)])
            let sealer = PayloadSealer(ring: try DataKeyRing(path: DataKeyFile.path(inDirectory: deployment.directory)))
            func storeAsEarlierBuild(_ text: String) throws -> PayloadID {
                let id = PayloadID.random()
                let (keyID, sealed) = try sealer.seal(Array(text.utf8), id: id, userID: 42)
                _ = try old.query("""
                    INSERT INTO payloads (id, user_id, key_id, body, created_at, expires_at, read_limit) VALUES ($1, 42, $2, $3, 0, $4, 0)
                    """, [.bytes(id.bytes), .int64(Int64(keyID)), .bytes(sealed), .int64(Int64(PostgresDeployment.nowMs + 3_600_000))])
                return id
            }
            var ids = [try storeAsEarlierBuild("before 1")]
            _ = try PostgresAdministration(url: url)
            #expect(try PostgresSchema.version(on: old) == PostgresSchema.currentVersion)
            ids.append(try storeAsEarlierBuild("before 2"))

            let service = try InProcessStore(deployment) { $0.database = url }
            let linked = "SELECT count(*) FROM pg_constraint WHERE conname = '\(PostgresDataKeys.foreignKey)'"
            #expect(try old.query(linked).int64(0, 0) == 1)
            #expect(try old.query("SELECT id FROM data_keys").rows == [[.int64(1)]])
            let host = UpgradedHost(deployment: deployment, reachable: service)
            let token = try host.login("alice")
            for id in ids {
                guard case .fetchOK(let fetched) = try host.device().request(.fetch(Fetch(id: id, token: token))) else {
                    Issue.record("FETCH \(id)"); continue
                }
                #expect(String(decoding: fetched.payload, as: UTF8.self).hasPrefix("before "))
            }
        }
    }
}

private struct UpgradedHost: StoreUnderTest {
    let deployment: TemporaryDeployment
    let reachable: any ReachableService
}
