import Foundation
@testable import PushStoreLogic
@testable import PushStoreSQLite
import Testing
import PushSecurity
import PushWire
@testable import PushStore

/// A scratch database with users alice and bob, and the registry as the device commands
/// change it.
final class RegistryScratch {
    let scratch: ScratchDatabase
    let users: UserAdministration
    let registry: RegistryAdministration
    let signer = CredentialSigner(serverKey: SecretKey(bytes: Array(repeating: 7, count: 32))!, purpose: CredentialSigner.registrationPurpose)
    var now: UInt64 = 1_700_000_000_000

    init() throws {
        scratch = try ScratchDatabase("registry")
        users = try UserAdministration(databasePath: scratch.path)
        registry = try RegistryAdministration(databasePath: scratch.path)
        _ = try users.add("alice", passwordHash: "h", nowMs: now)
        _ = try users.add("bob", passwordHash: "h", nowMs: now)
    }

    @discardableResult
    func enroll(_ device: String, user: String = "alice", tags: [String] = [], lifetimeMs: UInt64 = 86_400_000) throws(EnrolmentError) -> Enrolment {
        try registry.enroll(user: user, deviceID: device, tags: tags, lifetimeMs: lifetimeMs, nowMs: now, signer: signer)
    }
}

@Suite("The registry in the store database")
struct RegistryAdministrationTests {
    @Test("enrolling records a signed registration of an existing user; an unknown user is refused and nothing is recorded")
    func enrollsKnownUsersOnly() throws {
        let registry = try RegistryScratch()
        let enrolment = try registry.enroll("phone", tags: ["news", "eu"])
        let record = enrolment.registration
        #expect(enrolment.replaced == nil)
        #expect(record.state == .enrolled && record.changeSequence == 1 && record.issuedAt == registry.now)
        #expect(record.expiresAt == registry.now + 86_400_000 && record.tags == ["news", "eu"] && record.user == "alice")
        let opened = try Registration.open(record.credential, signer: registry.signer, nowMs: registry.now)
        #expect(opened == Registration(deviceID: "phone", user: "alice", tags: ["news", "eu"], issuedAt: record.issuedAt, expiresAt: record.expiresAt))
        #expect(throws: EnrolmentError.self) { try registry.enroll("tablet", user: "mallory") }
        #expect(try registry.registry.list().map(\.deviceID) == ["phone"])
        #expect(try registry.registry.lastChange() == 1, "a refused enrolment takes no change number")
    }

    @Test("[4.16-6] enrolling a device id again revokes its registration first, and the same millisecond is bumped by one")
    func reenrolmentRevokes() throws {
        let registry = try RegistryScratch()
        let first = try registry.enroll("phone").registration
        let second = try registry.enroll("phone", user: "bob")
        let replaced = try #require(second.replaced)
        #expect(replaced.state == .revoked && replaced.issuedAt == first.issuedAt && replaced.revokedAt == registry.now)
        #expect(replaced.changeSequence == 2 && second.registration.changeSequence == 3, "the revocation is numbered before the enrolment")
        #expect(second.registration.issuedAt == first.issuedAt + 1, "(device id, issued_at) names one registration")
        registry.now -= 5_000
        #expect(try registry.enroll("phone").registration.issuedAt == first.issuedAt + 2, "a clock stepped back still issues later")
        let rows = try registry.registry.list()
        #expect(rows.map(\.state) == [.revoked, .revoked, .enrolled])
        #expect(try registry.registry.enrolled(deviceID: "phone")?.user == "alice")
    }

    @Test("revoking takes the next change number; nothing enrolled under an id is nil; a revoked registration is never enrolled again")
    func revokes() throws {
        let registry = try RegistryScratch()
        try registry.enroll("phone")
        let revoked = try #require(try registry.registry.revoke(deviceID: "phone", nowMs: registry.now))
        #expect(revoked.state == .revoked && revoked.changeSequence == 2)
        #expect(try registry.registry.revoke(deviceID: "phone", nowMs: registry.now) == nil)
        #expect(try registry.registry.revoke(deviceID: "never", nowMs: registry.now) == nil)
        #expect(try registry.registry.enrolled(deviceID: "phone") == nil)
        #expect(try registry.registry.lastChange() == 2)
    }

    @Test("removing a user revokes each of its registrations as a change of its own, in the removal's transaction")
    func userRemovalRevokes() throws {
        let registry = try RegistryScratch()
        try registry.enroll("phone")
        try registry.enroll("tablet")
        try registry.enroll("bobs", user: "bob")
        let removed = try #require(try registry.users.remove("alice", clock: { registry.now }))
        #expect(removed.registrations == 2)
        let alice = try registry.registry.list(user: "alice")
        #expect(alice.map(\.state) == [.revoked, .revoked])
        #expect(Set(alice.map(\.changeSequence)) == [4, 5])
        #expect(try registry.registry.list(user: "bob").map(\.state) == [.enrolled])
        #expect(throws: EnrolmentError.self) { try registry.enroll("phone") }
    }

    @Test("a credential that cannot be handed over records nothing; invalid ids, tags and oversized registrations are refused")
    func refusals() throws {
        let registry = try RegistryScratch()
        struct Unwritable: Error {}
        #expect(throws: EnrolmentError.self) {
            try registry.registry.enroll(user: "alice", deviceID: "phone", tags: [], lifetimeMs: 1, nowMs: registry.now,
                                         signer: registry.signer) { _ in throw Unwritable() }
        }
        #expect(try registry.registry.list().isEmpty && registry.registry.lastChange() == 0)
        #expect(throws: EnrolmentError.self) { try registry.enroll("") }
        #expect(throws: EnrolmentError.self) { try registry.enroll(String(repeating: "d", count: 65)) }
        #expect(throws: EnrolmentError.self) { try registry.enroll("phone", tags: ["a\nb"]) }
        let many = (0..<14).map { String(repeating: "t", count: 60) + "\($0)" }
        let error = #expect(throws: EnrolmentError.self) { try registry.enroll("phone", tags: many) }
        guard case .tooLarge(let bytes)? = error else { Issue.record("\(String(describing: error))"); return }
        #expect(bytes > Registration.maxSignedBytes)
        #expect(try registry.registry.list().isEmpty)
    }

    @Test("[4.16-7] the writer's sweep drops revoked registrations once expired, and keeps enrolled ones and the change counter")
    func pruning() throws {
        let registry = try RegistryScratch()
        try registry.enroll("short", lifetimeMs: 1_000)
        try registry.enroll("long", lifetimeMs: 1_000)
        try registry.enroll("kept")
        _ = try registry.registry.revoke(deviceID: "short", nowMs: registry.now)
        _ = try registry.registry.revoke(deviceID: "kept", nowMs: registry.now)
        let writer = try SQLitePayloadWriter(path: registry.scratch.path)
        _ = try writer.sweepExpired(nowMs: registry.now + 2_000)
        #expect(try registry.registry.list().map(\.deviceID) == ["kept", "long"], "revoked and expired: gone; expired but enrolled: listed")
        #expect(try registry.registry.lastChange() == 5)
        #expect(try registry.enroll("next").registration.changeSequence == 6, "numbers are never reused")
    }
}

extension SchemaMigrationTests {
    @Test("version 2 to 3: the registry appears, empty, next to the users and payloads a version-2 build left")
    func addsTheRegistry() throws {
        let scratch = try ScratchDatabase()
        let old = try SQLiteConnection(path: scratch.path)
        try old.execute([SQLiteSchema.usersTable("users"), SQLiteSchema.payloadsTable("payloads"), SQLiteSchema.receiptsTable,
                         SQLiteSchema.metaAndTriggers, SQLiteSchema.indexes].joined(separator: ";\n"))
        try old.execute("""
            INSERT INTO users (id, name, password_hash, created_at) VALUES (42, 'alice', 'h', 1000);
            INSERT INTO payloads (seq, id_high, id_low, user_id, key_id, body, created_at, expires_at, read_limit)
                VALUES (3, 1, 2, 42, NULL, NULL, 0, 9999999999999, 0);
            PRAGMA user_version = 2;
            """)
        old.close()
        let registry = try RegistryAdministration(databasePath: scratch.path)
        #expect(try scratch.integer("PRAGMA user_version") == SQLiteSchema.currentVersion)
        #expect(try registry.list().isEmpty && registry.lastChange() == 0)
        let reader = try SQLitePayloadReader(path: scratch.path)
        #expect(try reader.user(named: "alice")?.id == 42)
        #expect(try reader.payload(sequence: 3)?.userID == 42)
        #expect(try reader.registrySequence() == 0)
        let signer = CredentialSigner(serverKey: SecretKey(bytes: Array(repeating: 7, count: 32))!, purpose: CredentialSigner.registrationPurpose)
        _ = try registry.enroll(user: "alice", deviceID: "phone", tags: [], lifetimeMs: 1_000, nowMs: 5, signer: signer)
        #expect(try reader.enrolledDevice("phone") == EnrolledDevice(userID: 42, issuedAt: 5, expiresAt: 1_005))
    }

    @Test("version 0 to the current one in one go: users get ids, the registry, SEND's tables and the API tokens are there")
    func fromVersion0() throws {
        let scratch = try ScratchDatabase()
        let old = try SQLiteConnection(path: scratch.path)
        try old.execute(schemaVersion0)
        try old.execute("INSERT INTO users (name, password_hash, created_at) VALUES ('alice', 'h', 1)")
        old.close()
        let registry = try RegistryAdministration(databasePath: scratch.path)
        #expect(try scratch.integer("PRAGMA user_version") == SQLiteSchema.currentVersion)
        #expect(try registry.lastChange() == 0)
        #expect(try scratch.integer("SELECT count(*) FROM registrations") == 0)
        #expect(try scratch.integer("SELECT count(*) FROM payloads WHERE outbox IS NOT NULL OR idem_key IS NOT NULL") == 0)
        #expect(try scratch.integer("SELECT count(*) FROM sqlite_master WHERE name IN ('pushes', 'idempotency_keys')") == 0,
                "version 8: SEND's push and key are columns of its payload")
        #expect(try scratch.integer("SELECT count(*) FROM api_tokens") == 0)
    }
}
