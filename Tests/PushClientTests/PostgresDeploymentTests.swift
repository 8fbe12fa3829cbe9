import Foundation
import PushStorePostgres
import PushStoreSQLite
import Testing
import PushClient
import PushSecurity
import PushSession
import PushStore
import PushTestSupport
import PushWire

/// A deployment whose stores keep their data in PostgreSQL (issue 14), through the real
/// binary: `init --database`, the user and device commands, and two store processes over
/// one database that clients fail over between.
@Suite("Deployments on PostgreSQL", .ownThread, .serialized, .enabled(if: PostgresCluster.testsEnabled))
struct PostgresDeploymentTests {
    @Test("init --database writes store.database and creates the tables; user, device and key commands then work on PostgreSQL")
    func commandsOnPostgres() throws {
        let url = try PostgresCluster.shared().createDatabase()
        let deployment = try TemporaryDeployment(commandLine: true, database: url)
        #expect(deployment.deployment.value("database", for: .store) == url)
        try deployment.addUser("alice", password: "alice-pw")
        let list = try SecurePushBinary.run(["user", "list", "--data-dir", deployment.directory])
        #expect(list.status == 0 && list.stdout.contains("alice"), "\(list)")
        let enrol = try SecurePushBinary.run(["device", "enroll", "--data-dir", deployment.directory, "--user", "alice", "--device", "phone",
                                              "--out", deployment.directory + "/phone.cred"])
        #expect(enrol.status == 0, "\(enrol.stderr)")
        #expect(try PostgresAdministration(url: url).enrolled(deviceID: "phone")?.user == "alice", "recorded in PostgreSQL")
        #expect(!FileManager.default.fileExists(atPath: StoreFiles.databasePath(deployment.directory)), "no SQLite file made")
        let keys = try SecurePushBinary.run(["key", "status", "--data-dir", deployment.directory])
        #expect(keys.status == 0 && keys.stdout.contains("key 1: 0 payloads (current)"), "\(keys)")
        let rotated = try SecurePushBinary.run(["key", "rotate", "--data-dir", deployment.directory])
        #expect(rotated.status == 0 && rotated.stdout.contains("added data key 2, which every store seals under from 2 seconds from now"),
                "\(rotated)")
        let removed = try SecurePushBinary.run(["user", "remove", "alice", "--data-dir", deployment.directory])
        #expect(removed.status == 0 && removed.stdout.contains("1 device revoked"), "\(removed)")
    }

    @Test("init makes every file a store host needs, data-keys too, and puts its keys in the database; init on a database that holds another deployment's keys is refused, leaving nothing")
    func initMakesEveryFile() throws {
        let url = try PostgresCluster.shared().createDatabase()
        let first = try TemporaryDeployment(commandLine: true, database: url)
        #expect(FileManager.default.fileExists(atPath: DataKeyFile.path(inDirectory: first.directory)), "init made data-keys")
        let status = try SecurePushBinary.run(["key", "status", "--data-dir", first.directory])
        #expect(status.status == 0 && status.stdout.contains("key 1: 0 payloads (current)"), "\(status)")
        let lone = try TemporaryDeployment(commandLine: true)
        #expect(FileManager.default.fileExists(atPath: DataKeyFile.path(inDirectory: lone.directory)), "on SQLite too")

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("securepush-second-init-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let second = try SecurePushBinary.run(["init", directory, "--database", url])
        #expect(second.status == 1 && second.stderr.contains("holds the data keys of another deployment")
                && second.stderr.contains("copy its directory here instead of running init"), "\(second)")
        #expect(!FileManager.default.fileExists(atPath: directory), "nothing left behind")
    }

    @Test("a malformed --database is refused with one line and a non-zero exit, naming no password")
    func badDatabaseURL() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("securepush-bad-url-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let bad = try SecurePushBinary.run(["init", directory, "--database", "mysql://root:hunter2@db/push"])
        #expect(bad.status != 0 && bad.stderr.contains("postgresql://") && !bad.stderr.contains("hunter2"), "\(bad.stderr)")
        // A well-formed URL of a server that is not there: the failure to reach the
        // database is reported, and nothing is left behind, so init can simply run again.
        let port = try readmeFreePort()
        let unreachable = try SecurePushBinary.run(["init", directory, "--database", "postgresql://u:hunter2@127.0.0.1:\(port)/push"])
        #expect(unreachable.status != 0 && unreachable.stderr.contains("cannot set up") && !unreachable.stderr.contains("hunter2")
                && unreachable.stderr.contains("nothing was created"), "\(unreachable.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory), "the directory init made is gone again")
        let existing = FileManager.default.temporaryDirectory.appendingPathComponent("securepush-kept-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: existing, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: existing) }
        try "mine".write(toFile: existing + "/notes.txt", atomically: true, encoding: .utf8)
        let intoExisting = try SecurePushBinary.run(["init", existing, "--database", "postgresql://u@127.0.0.1:\(port)/push"])
        #expect(intoExisting.status != 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: existing) == ["notes.txt"], "only what was there before stays")
        let retried = try SecurePushBinary.run(["init", directory])
        #expect(retried.status == 0, "init runs again after the failed one: \(retried.stderr)")
        let store = try SecurePushBinary.run(["store", "--data-dir", directory, "--listen", "127.0.0.1:0", "--database", "nonsense"])
        #expect(store.status != 0 && store.stderr.contains("--database"), "\(store.stderr)")
    }

    @Test("two stores over one database: one is SIGKILLed while a provider sends, the clients carry on through the other, and every acknowledged payload is shown exactly once")
    func killOneOfTwoStores() throws {
        let url = try PostgresCluster.shared().createDatabase()
        let deployment = try TemporaryDeployment(database: url)
        try deployment.addUser("alice", password: "alice-pw")
        _ = try deployment.enrolledRegistration("phone")
        let storeA = try ServiceProcess(["store", "--data-dir", deployment.directory])
        defer { storeA.killHard() }
        let storeB = try ServiceProcess(["store", "--data-dir", deployment.directory])
        defer { _ = storeB.terminate() }
        let gateway = try ServiceProcess(["gateway", "--data-dir", deployment.directory, "--store", "127.0.0.1:\(storeA.port),127.0.0.1:\(storeB.port)"])
        defer { _ = gateway.terminate() }

        let clients = try FailoverClients(deployment, stores: [storeA.port, storeB.port], gateway: gateway.port)
        try clients.login()
        #expect(clients.run(until: { clients.events.contains(.gatewayConnected) }))
        var accepted: [String] = []
        var refused = 0
        for index in 0..<60 {
            if index == 20 { storeA.killHard() }
            let text = "message \(index)"
            switch clients.send(text) {
            case .success?: accepted.append(text)
            default: refused += 1
            }
        }
        #expect(clients.provider.storeAddress.port == storeB.port, "the provider moved to the live store")
        #expect(accepted.count >= 55, "at most the sends in flight at the kill fail: \(refused) refused")
        #expect(clients.run(until: { Set(clients.texts).isSuperset(of: accepted) }, timeoutSeconds: 20),
                "missing: \(Set(accepted).subtracting(clients.texts).sorted())")
        clients.idle(0.5)
        let counts = Dictionary(clients.texts.map { ($0, 1) }, uniquingKeysWith: +)
        #expect(counts.values.allSatisfy { $0 == 1 }, "shown more than once: \(counts.filter { $0.value > 1 })")
        #expect(clients.device.storeAddress.port == storeB.port)
    }
}
