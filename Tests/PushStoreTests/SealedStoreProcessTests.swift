import Foundation
import PushClient
import PushPostgres
import PushSealing
@testable import PushStoreSQLite
import PushTestSupport
import PushWire
import Testing

/// `securepush store` as a child process on either backend, over real sockets: device keys,
/// KEYS and sealed payloads (SPEC.md 4.6, 4.18, 4.19). Sealed payloads are built without
/// cryptography (`SealedSamples`): the store never opens them.
final class SealedStoreProcess: StoreUnderTest {
    let deployment: TemporaryDeployment
    let service: ServiceProcess
    /// The PostgreSQL database; nil on SQLite.
    let database: String?

    init(_ backend: Backend) throws {
        database = try backend.database()
        deployment = try TemporaryDeployment(database: database)
        try deployment.addUser("alice", password: "alice-pw")
        try deployment.addUser("bob", password: "bob-pw")
        service = try ServiceProcess(["store", "--data-dir", deployment.directory])
    }

    /// Registrations whose key columns hold anything, enrolled or revoked, as the database has them.
    func keyedRows() throws -> Int64 {
        let sql = "SELECT count(*) FROM registrations WHERE key_suite IS NOT NULL OR device_key IS NOT NULL OR key_id IS NOT NULL"
        if let database {
            let connection = try PostgresBlockingConnection(database)
            defer { connection.close() }
            return try connection.query(sql).int64(0, 0)
        }
        let connection = try SQLitePayloadDatabase.open(path: deployment.directory + "/" + SQLitePayloadDatabase.fileName)
        return try connection.integer(sql) ?? -1
    }

    var reachable: any ReachableService { service }

    /// LOGIN of `device` (enrolled first unless it is) with `key`: LOGIN_OK.
    func login(_ device: String, key: DevicePublicKey?, user: String = "alice") throws -> LoginOK {
        try deployment.enrolledRegistration(device, user: user)
        let reply = try self.device().request(.login(Login(user: user, password: Array("\(user)-pw".utf8), deviceID: device, deviceKey: key)))
        guard case .loginOK(let ok) = reply else { throw ServiceError.failed("login refused: \(reply)") }
        return ok
    }

    /// The registry's entries after `cursor`, every page, and the last cursor.
    func registry(after cursor: UInt64) throws -> (entries: [RegistryEntry], cursor: UInt64) {
        let gateway = try gateway()
        var entries: [RegistryEntry] = []
        var cursor = cursor
        while true {
            guard case .registryOK(let page) = try gateway.request(.registry(RegistryRequest(cursor: cursor))) else {
                throw ServiceError.failed("REGISTRY refused")
            }
            entries += page.entries
            cursor = page.cursor
            if !page.hasMore { return (entries, cursor) }
        }
    }

    func keys(_ user: String = "alice", via provider: BlockingWireClient? = nil) throws -> Message {
        try (provider ?? self.provider()).request(.keys(Keys(user: user)))
    }
}

@Suite("Sealed payloads at the store binary, on SQLite and PostgreSQL", .ownThread, .serialized)
struct SealedStoreProcessTests {
    @Test("[4.6-5] [4.6-8] [4.16-5] [4.16-6] [4.18-1] [4.18-3] [4.18-6] device keys over the wire: LOGIN registers and names them, a new key is listed again by REGISTRY, KEYS lists them in order, a revoked device's key is gone at once, and a KEYS_OK over max_frame is TOO_LARGE",
          arguments: Backend.available)
    func deviceKeys(backend: Backend) throws {
        let store = try SealedStoreProcess(backend)
        let first = SealedSamples.key(1)
        #expect(try store.login("phone", key: first).keyID == SealedSamples.keyID(first, device: "phone"))
        #expect(try store.login("phone", key: nil).keyID == SealedSamples.keyID(first, device: "phone"), "[4.6-7] kept")
        let tabletKey = SealedSamples.key(2, suite: .xwing)
        _ = try store.login("tablet", key: tabletKey)
        let loaded = try store.registry(after: 0)
        let second = SealedSamples.key(3)
        #expect(try store.login("phone", key: second).keyID == SealedSamples.keyID(second, device: "phone"))
        let after = try store.registry(after: loaded.cursor)
        #expect(after.entries.count == 1 && after.entries.first?.state == .enrolled && after.cursor > loaded.cursor,
                "the re-keyed registration is listed again")
        #expect(try store.registry(after: after.cursor).entries.isEmpty)
        _ = try store.login("phone", key: second)
        #expect(try store.registry(after: after.cursor).entries.isEmpty, "the same key again commits nothing")

        guard case .keysOK(let listed) = try store.keys() else { Issue.record("KEYS failed"); return }
        #expect(listed.keys.map(\.deviceID) == ["phone", "tablet"])
        #expect(listed.keys.map(\.keyID) == [SealedSamples.keyID(second, device: "phone"), SealedSamples.keyID(tabletKey, device: "tablet")])
        #expect(listed.cursor == after.cursor)
        #expect(errorStatus(try store.keys("nobody")) == .unknownUser)

        let small = try store.reachable.connect()
        guard case .helloOK = try small.hello(Hello(role: .provider, credential: store.deployment.providerCredential(for: .store),
                                                     maxFrame: 1024)) else { Issue.record("HELLO refused"); return }
        #expect(errorStatus(try store.keys(via: small)) == .tooLarge, "the tablet's entry alone is 1236 bytes")

        try store.deployment.revoke("tablet")
        guard case .keysOK(let revoked) = try store.keys(via: small) else { Issue.record("KEYS failed"); return }
        #expect(revoked.keys.map(\.deviceID) == ["phone"], "the revoked device's key is gone from the next KEYS")
        #expect(revoked.cursor > listed.cursor)
        #expect(try store.keyedRows() == 1, "the revoked registration's key is deleted, not only left out")
        let removed = try SecurePushBinary.run(["user", "remove", "alice", "--data-dir", store.deployment.directory])
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(try store.keyedRows() == 0, "removing the user deleted the keys of its registrations")
        #expect(errorStatus(try store.keys(via: small)) == .unknownUser)
    }

    @Test("[4.19-1] [4.19-2] [4.18-5] [4.19-4] [4.8-1] sealed payloads over the wire: malformed ones are BAD_REQUEST whoever they are for, the id is derived and a second is CONFLICT, and each device fetches its own view or NOT_SEALED_FOR_DEVICE",
          arguments: Backend.available)
    func sealedPayloads(backend: Backend) throws {
        let store = try SealedStoreProcess(backend)
        let phoneKey = SealedSamples.key(1), tabletKey = SealedSamples.key(2, suite: .xwing)
        _ = try store.login("phone", key: phoneKey)
        _ = try store.login("tablet", key: tabletKey)
        let provider = try store.provider()
        for (why, bytes) in SealedSamples.malformed {
            for user in ["alice", "nobody"] {
                let reply = try provider.request(.store(StoreRequest(user: user, payload: bytes, form: .sealed)))
                #expect(errorStatus(reply) == .badRequest, "\(why) for \(user)")
            }
        }
        let phoneKeyID = SealedSamples.keyID(phoneKey, device: "phone")
        let sealed = SealedPayload(sealNonce: Array(repeating: 0x42, count: 16),
                                   stanzas: [SealedSamples.stanza(phoneKeyID), SealedSamples.stanza(SealedSamples.keyID(tabletKey, device: "tablet"),
                                                                                                   suite: .xwing)],
                                   body: Array("the body, sealed".utf8))
        guard case .storeOK(let stored) = try provider.request(.store(StoreRequest(user: "alice", payload: sealed.bytes, form: .sealed))) else {
            Issue.record("the sealed STORE failed"); return
        }
        #expect(stored.id == SealedNames.payloadID(sealNonce: sealed.sealNonce))
        guard case .keysOK(let keys) = try store.keys(via: provider) else { Issue.record("KEYS failed"); return }
        #expect(stored.cursor == keys.cursor)
        #expect(errorStatus(try provider.request(.store(StoreRequest(user: "alice", payload: sealed.bytes, form: .sealed)))) == .conflict)

        let device = try store.device()
        let phone = try store.login("phone", key: phoneKey).token
        guard case .fetchOK(let fetched) = try device.request(.fetch(Fetch(id: stored.id, token: phone))) else {
            Issue.record("the phone could not fetch"); return
        }
        #expect(fetched.sealed)
        #expect(fetched.payload == sealed.deviceView(for: phoneKeyID)?.bytes, "the phone's view: its own stanza alone")
        let tablet = try store.login("tablet", key: nil).token
        guard case .fetchOK(let tabletView) = try device.request(.fetch(Fetch(id: stored.id, token: tablet))) else {
            Issue.record("the tablet could not fetch"); return
        }
        #expect(try SealedPayload(parsing: tabletView.payload).stanzas.map(\.suite) == [.xwing])
        let laptop = try store.login("laptop", key: SealedSamples.key(7)).token
        #expect(errorStatus(try device.request(.fetch(Fetch(id: stored.id, token: laptop)))) == .notSealedForDevice, "enrolled after")
        let watch = try store.login("watch", key: nil).token
        #expect(errorStatus(try device.request(.fetch(Fetch(id: stored.id, token: watch)))) == .notSealedForDevice, "no key")
        guard case .statusOK(let status) = try provider.request(.status(StatusRequest(id: stored.id))) else { Issue.record("no STATUS"); return }
        #expect(status.fetchCount == 2, "the refusals are not counted: \(status.fetchCount)")
    }
}
