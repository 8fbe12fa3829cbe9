import Foundation
@testable import PushStoreSQLite
import Testing
import PushClient
import PushTestSupport
import PushWire
@testable import PushStore

extension StoreProcess {
    var databasePath: String { StoreFiles.databasePath(deployment.directory) }

    /// `securepush ARGUMENTS --data-dir DIR`, which must succeed; its stdout.
    @discardableResult
    func command(_ arguments: [String], stdin: String? = nil) throws -> String {
        let result = try SecurePushBinary.run(arguments + ["--data-dir", deployment.directory], stdin: stdin)
        guard result.status == 0 else { throw ServiceError.failed("\(arguments.joined(separator: " ")): \(result.stderr)") }
        return result.stdout
    }

    func fetched(_ id: PayloadID, token: [UInt8], on device: BlockingWireClient) throws -> String? {
        guard case .fetchOK(let ok) = try device.request(.fetch(Fetch(id: id, token: token))) else { return nil }
        return String(decoding: ok.payload, as: UTF8.self)
    }
}

@Suite("User removal against the store binary", .ownThread)
struct UserRemovalProcessTests {
    @Test("user remove refuses the user's old token and new STOREs at once, on connections already open")
    func removalReachesARunningStore() throws {
        let store = try StoreProcess()
        let provider = try store.provider()
        let ids = try (0..<3).map { try store.store("alice's secret \($0)", via: provider) }
        let token = try store.login("alice")
        let device = try store.device()
        #expect(try store.fetched(ids[0], token: token, on: device) == "alice's secret 0")

        let output = try store.command(["user", "remove", "alice"])
        #expect(output.contains("3 payloads deleted, 1 device revoked"), "\(output)")
        // The very next requests, with no pause: the store checks for changes before each.
        #expect(errorStatus(try device.request(.fetch(Fetch(id: ids[1], token: token)))) == .badToken)
        #expect(errorStatus(try device.request(.sync(Sync(token: token)))) == .badToken)
        #expect(errorStatus(try device.request(.ack(Ack(id: ids[2], token: token)))) == .badToken)
        #expect(errorStatus(try provider.request(.store(StoreRequest(user: "alice", payload: [1])))) == .unknownUser)
        #expect(errorStatus(try store.device().request(.login(Login(user: "alice", password: Array("alice-pw".utf8), deviceID: "phone")))) == .badCredentials)
        #expect(try store.fetched(try store.store("bob's", for: "bob", via: provider), token: try store.login("bob"), on: device) == "bob's")
    }

    @Test("a name added again is a new user: none of the old data, the old token refused, also after a restart")
    func readdedName() throws {
        let store = try StoreProcess()
        let old = try store.store("the first alice's")
        let oldToken = try store.login("alice")
        try store.command(["user", "remove", "alice"])
        try store.command(["user", "add", "alice"], stdin: "second-alice-pw\n")

        let newToken = try store.login("alice", password: "second-alice-pw")
        let device = try store.device()
        #expect(errorStatus(try device.request(.fetch(Fetch(id: old, token: newToken)))) == .notFound)
        #expect(try device.request(.sync(Sync(token: newToken))) == .syncOK(SyncOK(ids: [], cursor: 0, hasMore: false)))
        #expect(errorStatus(try device.request(.fetch(Fetch(id: old, token: oldToken)))) == .badToken)
        let fresh = try store.store("the second alice's")
        #expect(errorStatus(try device.request(.fetch(Fetch(id: fresh, token: oldToken)))) == .badToken)
        #expect(try store.fetched(fresh, token: newToken, on: device) == "the second alice's")

        #expect(store.service.terminate() == 0)
        try store.restart()
        let again = try store.device()
        #expect(errorStatus(try again.request(.sync(Sync(token: oldToken)))) == .badToken)
        #expect(try store.fetched(fresh, token: newToken, on: again) == "the second alice's")
    }

    @Test("user list shows each user, when it was added in local ISO 8601 time, and its readable payloads")
    func userList() throws {
        let store = try StoreProcess()
        let provider = try store.provider()
        _ = try store.store("one", via: provider)
        _ = try store.store("two", via: provider)
        let recalled = try store.store("three", via: provider)
        #expect(try provider.request(.recall(Recall(id: recalled))) == .recallOK(RecallOK(id: recalled)))
        let lines = try store.command(["user", "list"]).split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("NAME") == true)
        let alice = try #require(lines.first { $0.hasPrefix("alice ") })
        let fields = alice.split(separator: " ")
        #expect(fields.count == 3 && fields[2] == "2")
        let created = String(fields[1])
        #expect(created.range(of: #"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[+-]\d{2}:\d{2}$"#, options: .regularExpression) != nil, "\(created)")
        #expect(lines.contains { $0.hasPrefix("bob ") && $0.hasSuffix(" 0") })

        // The command opened and closed the database beside the running store; the store's
        // locks and WAL must have survived that, so the next STORE is seen by the next list.
        #expect(FileManager.default.fileExists(atPath: store.databasePath + "-wal"))
        _ = try store.store("four", via: provider)
        #expect(try store.command(["user", "list"]).split(separator: "\n").contains { $0.hasPrefix("alice ") && $0.hasSuffix(" 3") })
    }
}

@Suite("Payload bytes at rest, through the store binary", .ownThread)
struct DataAtRestProcessTests {
    /// Every byte of the database, its WAL and its shared memory file.
    private func bytesAtRest(_ store: StoreProcess) -> [UInt8] {
        StoreFiles.databaseFiles(store.databasePath).reduce(into: [UInt8]()) { all, path in
            if let data = FileManager.default.contents(atPath: path) { all += data }
        }
    }

    private func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count, let first = needle.first else { return false }
        var index = 0
        while let start = haystack[index...].firstIndex(of: first) {
            if start + needle.count > haystack.count { return false }
            if haystack[start..<start + needle.count].elementsEqual(needle) { return true }
            index = start + 1
        }
        return false
    }

    private func modes(_ store: StoreProcess) throws -> [String: Int] {
        var modes: [String: Int] = [:]
        for path in StoreFiles.databaseFiles(store.databasePath) + [StoreFiles.dataKeysPath(forDatabase: store.databasePath)]
        where FileManager.default.fileExists(atPath: path) {
            modes[path] = try (FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? -1
        }
        return modes
    }

    /// The sealed bytes of a payload's row, read beside the running store.
    private func sealedBody(_ store: StoreProcess, _ id: PayloadID) throws -> [UInt8] {
        let connection = try SQLiteConnection(path: store.databasePath)
        let statement = try connection.prepare("SELECT body FROM payloads WHERE id_high = ? AND id_low = ?", persistent: false)
        try statement.bind(SQLitePayloadDatabase.idValues(id))
        return try statement.step() ? statement.blob(0) : []
    }

    @Test("no payload byte is readable in store.sqlite, -wal or -shm, erased ones not even sealed; the files are 0600")
    func nothingReadableAtRest() throws {
        let store = try StoreProcess()
        let marker = "MARKER-\(UUID().uuidString)"
        let provider = try store.provider()
        var live: [(PayloadID, String)] = [], recalled: [PayloadID] = [], readOnce: [(PayloadID, String)] = []
        for n in 0..<24 {
            // Small bodies sit inside their page; large ones spill into overflow pages.
            let text = "\(marker) \(n) " + String(repeating: "x", count: n % 2 == 0 ? 200 : 3_000)
            switch n % 3 {
            case 0: live.append((try store.store(text, via: provider), text))
            case 1: readOnce.append((try store.store(text, readLimit: 1, via: provider), text))
            default: recalled.append(try store.store(text, via: provider))
            }
        }
        let erasedSealed = try (recalled + readOnce.map(\.0)).map { try sealedBody(store, $0) }
        #expect(erasedSealed.allSatisfy { $0.count > 200 })

        for id in recalled { #expect(try provider.request(.recall(Recall(id: id))) == .recallOK(RecallOK(id: id))) }
        let token = try store.login("alice")
        let device = try store.device()
        for (id, text) in readOnce {
            #expect(try store.fetched(id, token: token, on: device) == text)
            #expect(try device.request(.ack(Ack(id: id, token: token))) == .ackOK(AckOK(id: id)))
            #expect(errorStatus(try device.request(.fetch(Fetch(id: id, token: token)))) == .gone)
        }
        for (id, text) in live { #expect(try store.fetched(id, token: token, on: device) == text) }

        #expect(!contains(bytesAtRest(store), Array(marker.utf8)), "while the store runs")
        let running = try modes(store)
        #expect(running.count == 4 && running.values.allSatisfy { $0 == 0o600 }, "\(running)")

        #expect(store.service.terminate() == 0)
        let stopped = bytesAtRest(store)
        #expect(!contains(stopped, Array(marker.utf8)), "after the store stopped")
        for sealed in erasedSealed {
            // Even with the data key, nothing of an erased payload is left to open.
            #expect(!contains(stopped, Array(sealed.prefix(24))), "an erased payload's sealed bytes are still on disk")
        }
        #expect(try modes(store).values.allSatisfy { $0 == 0o600 })
    }

    @Test("key rotate against a running store: new payloads take the new key, old ones are re-sealed, then the old key is pruned")
    func rotationWhileRunning() throws {
        let store = try StoreProcess()
        let provider = try store.provider()
        let before = try (0..<20).map { try store.store("before \($0)", via: provider) }
        #expect(try store.command(["key", "rotate"]).contains("added data key 2; 20 payloads still under older keys"))
        let after = try store.store("after", via: provider)
        #expect(waitUntil(timeoutSeconds: 15) { (try? store.command(["key", "status"]))?.contains("key 1: 0 payloads") == true },
                "the running store re-seals in the background")
        #expect(try store.command(["key", "status"]).contains("key 2: 21 payloads (current)"))
        #expect(try store.command(["key", "prune"]).contains("removed data key 1"))

        let token = try store.login("alice")
        let device = try store.device()
        for (index, id) in before.enumerated() { #expect(try store.fetched(id, token: token, on: device) == "before \(index)") }
        #expect(try store.fetched(after, token: token, on: device) == "after")
        #expect(store.service.terminate() == 0)
        try store.restart()
        #expect(try store.fetched(before[0], token: token, on: try store.device()) == "before 0")
    }
}
