import Foundation
import PushPostgres
import PushSecurity
@testable import PushStore
@testable import PushStoreLogic
@testable import PushStorePostgres
import PushTestSupport
import PushWire
import Testing

@Suite("PostgreSQL schema and administration", .ownThread, .serialized, .enabled(if: PostgresCluster.testsEnabled))
struct PostgresAdministrationTests {
    @Test("migrations are applied once even by stores starting together, and a newer schema is refused with a clear error")
    func migrations() async throws {
        let url = try await onOwnThread { try PostgresCluster.shared().createDatabase() }
        let opened = try await concurrently(4) { _ in try PostgresAdministration(url: url).lastChange() }
        #expect(opened == [0, 0, 0, 0])
        let versions = try PostgresBlockingConnection(url).query("SELECT version FROM schema_version ORDER BY version")
        #expect(versions.rows == (1...PostgresSchema.currentVersion).map { [.int64($0)] })
        let options = try PostgresBlockingConnection(url).query("SELECT array_to_string(reloptions, ',') FROM pg_class WHERE relname = 'payloads'")
        #expect(options.rows == [[.text("fillfactor=70")]], "version 2: room for HOT updates")

        _ = try PostgresBlockingConnection(url).query("INSERT INTO schema_version (version) VALUES (99)")
        #expect {
            _ = try PostgresAdministration(url: url)
        } throws: { error in
            "\(error)".contains("version 99, newer than this build knows")
        }
        let deployment = try TemporaryDeployment()
        var configuration = StoreConfiguration(deployment: deployment.deployment, host: "127.0.0.1", port: 0)
        configuration.database = url
        configuration.logger = .silent("securepush.store")
        let ready = configuration
        #expect {
            _ = try InProcessStore(deployment) { $0 = ready }
        } throws: { error in
            guard let failure = error as? StoreServiceError, case .cannotStartPostgres(.schema(_, .newer(99, _))) = failure else { return false }
            return true
        }
    }

    @Test("a bad URL and an unreachable server are typed errors that never show the password")
    func errorsHideThePassword() throws {
        #expect {
            _ = try PostgresAdministration(url: "postgresql://u:SECRETPW@127.0.0.1:1/db?sslmode=bogus")
        } throws: { error in
            !"\(error)".contains("SECRETPW")
        }
        let deployment = try TemporaryDeployment()
        var configuration = StoreConfiguration(deployment: deployment.deployment, host: "127.0.0.1", port: 0)
        configuration.database = "postgresql://u:SECRETPW@127.0.0.1:1/db?connect_timeout=2"
        configuration.logger = .silent("securepush.store")
        let ready = configuration
        #expect {
            _ = try InProcessStore(deployment) { $0 = ready }
        } throws: { error in
            guard let failure = error as? StoreServiceError, case .cannotStartPostgres(.cannotConnect) = failure else { return false }
            return !"\(error)".contains("SECRETPW") && "\(error)".contains("****")
        }
    }

    @Test("users: random identities, a name once; removal takes the user's payloads and revokes its devices; a name added again is dated past the removal fence")
    func users() async throws {
        let database = try await onOwnThread { try PostgresDeployment() }
        #expect(try database.admin.add("alice", passwordHash: "x", nowMs: 1) == nil)
        let users = try database.admin.list(nowMs: PostgresDeployment.nowMs)
        #expect(users.map(\.name) == ["alice", "bob"])
        let alice = try database.sql("SELECT id FROM users WHERE name = 'alice'").int64(0, 0)
        #expect(alice > 0)
        try database.enroll("phone")
        try database.enroll("tablet")
        _ = try database.sql("""
            INSERT INTO payloads (id, user_id, key_id, body, created_at, expires_at, read_limit) VALUES ($1, $2, 1, '\\x00', 0, $3, 0)
            """, [.bytes(PayloadID.random().bytes), .int64(alice), .int64(Int64(PostgresDeployment.nowMs + 60_000))])
        #expect(try database.admin.list(nowMs: PostgresDeployment.nowMs).first?.livePayloads == 1)
        let before = try database.admin.lastChange()
        var clock = PostgresDeployment.nowMs
        let removed = try database.admin.remove("alice") { clock }
        #expect(removed?.payloads == 1 && removed?.registrations == 2)
        #expect(try database.admin.lastChange() == before + 2, "[4.16-5] one change per revoked registration")
        #expect(try database.sql("SELECT count(*) FROM payloads").int64(0, 0) == 0)
        #expect(try database.admin.enrolled(deviceID: "phone") == nil)
        #expect(try database.admin.remove("alice") { clock } == nil)
        clock = 0
        let again = try database.admin.add("alice", passwordHash: "y", nowMs: 5)
        #expect(again != nil && again!.id != UInt64(alice))
        #expect(again!.createdAt > PostgresDeployment.nowMs - 60_000, "created no earlier than the fence, whatever the clock said")
    }

    /// The fence is decided in Swift (`UserRemoval.fence`) from the value the removal holds
    /// locked; the database keeps what it is given.
    @Test("a removal made with a clock behind an earlier removal's never moves the removal fence back")
    func removalFenceNeverMovesBack() async throws {
        let database = try await onOwnThread { try PostgresDeployment() }
        let t = PostgresDeployment.nowMs
        #expect(try database.admin.remove("alice") { t } != nil)
        #expect(try database.admin.remove("bob") { 5 } != nil)
        #expect(try database.sql("SELECT value FROM store_meta WHERE key = 'removal_fence_ms'").int64(0, 0)
                == Int64(t + UserRemoval.fenceMs))
        #expect(UserRemoval.fence(afterRemovalAt: .max - 1, held: 0) == .max, "never wrapping around")
    }

    @Test("[4.16-5] [4.16-6] enrolling a device again revokes its earlier registration first, numbered before the new one, and issues after it")
    func registry() async throws {
        let database = try await onOwnThread { try PostgresDeployment() }
        let signer = CredentialSigner(serverKey: database.deployment.deployment.serverKey, purpose: CredentialSigner.registrationPurpose)
        let first = try database.admin.enroll(user: "alice", deviceID: "phone", tags: ["a"], lifetimeMs: 60_000, nowMs: 1_000, signer: signer)
        let second = try database.admin.enroll(user: "alice", deviceID: "phone", tags: [], lifetimeMs: 60_000, nowMs: 1_000, signer: signer)
        #expect(second.replaced?.changeSequence == first.registration.changeSequence + 1)
        #expect(second.registration.changeSequence == first.registration.changeSequence + 2)
        #expect(second.registration.issuedAt == 1_001)
        #expect(try database.admin.list(user: "alice").map(\.state) == [.revoked, .enrolled])
        #expect(try database.admin.list(user: nil).first?.tags == ["a"])
        #expect {
            try database.admin.enroll(user: "carol", deviceID: "x", tags: [], lifetimeMs: 1, nowMs: 1, signer: signer)
        } throws: { error in
            if case .unknownUser = error as? EnrolmentError { return true }
            return false
        }
        let revoked = try database.admin.revoke(deviceIDs: ["phone", "nothing"], nowMs: 2_000)
        let last = try database.admin.lastChange()
        #expect(revoked.count == 1 && revoked[0].changeSequence == last)
        #expect(try database.admin.enrolled(deviceID: "phone") == nil)
    }
}
