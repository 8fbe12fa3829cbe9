import Foundation
import PushClient
import PushPostgres
import PushSecurity
import PushStore
import PushStorePostgres
import PushTestSupport
import PushWire
import Testing

/// A deployment (keys, data keys, config) whose store database is a fresh PostgreSQL
/// database of the shared test cluster, with users alice and bob added there.
/// @unchecked: its administration connection is used by one thread at a time (the test's).
final class PostgresDeployment: @unchecked Sendable {
    let deployment: TemporaryDeployment
    let url: String
    private(set) var admin: PostgresAdministration

    init(url: String? = nil, users: Bool = true) throws {
        deployment = try TemporaryDeployment()
        self.url = try url ?? PostgresCluster.shared().createDatabase()
        admin = try PostgresAdministration(url: self.url)
        // The database's data keys, from this deployment's file, as its first store or key
        // command makes them: rows a test writes itself are sealed under key 1.
        _ = try PostgresDataKeyAdministration(url: self.url, dataKeysPath: DataKeyFile.path(inDirectory: deployment.directory))
        if users {
            try addUser("alice", password: "alice-pw")
            try addUser("bob", password: "bob-pw")
        }
    }

    /// A new administration connection, after the server restarted under the old one.
    func reopenAdministration() throws {
        admin = try PostgresAdministration(url: url)
    }

    static var nowMs: UInt64 { UInt64(Date().timeIntervalSince1970 * 1000) }

    func addUser(_ name: String, password: String) throws {
        let hash = try PasswordHash.make(password: Array(password.utf8), iterations: 1000)
        guard try admin.add(name, passwordHash: hash.encoded, nowMs: PostgresDeployment.nowMs) != nil else {
            throw ServiceError.failed("user \(name) already exists")
        }
    }

    /// Enrolls `device` for `user` (revoking its earlier registration); the credential.
    @discardableResult
    func enroll(_ device: String, user: String = "alice") throws -> [UInt8] {
        let signer = CredentialSigner(serverKey: deployment.deployment.serverKey, purpose: CredentialSigner.registrationPurpose)
        return try admin.enroll(user: user, deviceID: device, tags: [], lifetimeMs: 86_400_000, nowMs: PostgresDeployment.nowMs,
                                signer: signer).registration.credential
    }

    private let sqlLock = NSLock()
    private var sqlConnection: PostgresBlockingConnection?

    /// One statement on a connection of the test's own, as an operator's psql would run it
    /// (one connection for all: tests poll with it, and the cluster takes 60 at most). A
    /// connection the server dropped (a test killed it) is replaced once.
    func sql(_ text: String, _ parameters: [PostgresValue] = []) throws -> PostgresResult {
        try sqlLock.withLock {
            if let connection = sqlConnection {
                do {
                    return try connection.query(text, parameters)
                } catch let error as PostgresError where error.kind == .connection {
                    sqlConnection = nil
                }
            }
            let connection = try PostgresBlockingConnection(url)
            sqlConnection = connection
            return try connection.query(text, parameters)
        }
    }

    /// A store on this database, in this process.
    func startStore(clock: ManualClock? = nil, configure: (inout StoreConfiguration) -> Void = { _ in }) throws -> InProcessStore {
        try InProcessStore(deployment) {
            $0.database = url
            if let clock { $0.clock = clock.wallMilliseconds }
            configure(&$0)
        }
    }
}

/// A store on PostgreSQL, as `StoreUnderTest` sees it (provider, device and STORE helpers).
/// @unchecked: what it holds is used from any thread (the store lives on its loop thread).
struct PostgresStoreClient: StoreUnderTest, @unchecked Sendable {
    let database: PostgresDeployment
    let service: InProcessStore
    var deployment: TemporaryDeployment { database.deployment }
    var reachable: any ReachableService { service }

    /// A token from LOGIN at this store, the device enrolled in the database first unless it
    /// already is for that user; by default alice's "phone", or "NAME-phone".
    func token(_ user: String = "alice", device: String? = nil) throws -> [UInt8] {
        let device = device ?? (user == "alice" ? "phone" : "\(user)-phone")
        if try database.admin.enrolled(deviceID: device)?.user != user { try database.enroll(device, user: user) }
        let reply = try self.device().request(.login(Login(user: user, password: Array("\(user)-pw".utf8), deviceID: device)))
        guard case .loginOK(let ok) = reply else { throw ServiceError.failed("login refused: \(reply)") }
        return ok.token
    }
}

extension PostgresDeployment {
    func client(_ service: InProcessStore) -> PostgresStoreClient { PostgresStoreClient(database: self, service: service) }
}

/// Runs `count` bodies at once, each on its own thread, and waits for all.
func concurrently<T: Sendable>(_ count: Int, _ body: @escaping @Sendable (Int) throws -> T) async throws -> [T] {
    try await withThrowingTaskGroup(of: (Int, T).self) { group in
        for index in 0..<count { group.addTask { (index, try await onOwnThread { try body(index) }) } }
        var results = [T?](repeating: nil, count: count)
        for try await (index, value) in group { results[index] = value }
        return results.compactMap { $0 }
    }
}
