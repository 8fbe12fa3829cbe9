import Foundation
import Testing
import PushClient
import PushTestSupport
import PushWire

extension StoreProcess {
    /// `securepush ARGUMENTS --data-dir DIR` expected to fail: its stderr.
    func failing(_ arguments: [String]) throws -> String {
        let result = try SecurePushBinary.run(arguments + ["--data-dir", deployment.directory])
        #expect(result.status != 0, "\(arguments.joined(separator: " ")) succeeded: \(result.stdout)")
        return result.stderr
    }

    /// `securepush device enroll` into a file in the deployment; the credential.
    func enroll(_ device: String, user: String = "alice", tags: [String] = []) throws -> [UInt8] {
        let file = deployment.directory + "/\(device).cred"
        try command(["device", "enroll", "--user", user, "--device", device, "--out", file] + tags.flatMap { ["--tag", $0] })
        let hex = try String(contentsOfFile: file, encoding: .utf8).filter { !$0.isWhitespace }
        guard let credential = [UInt8](hex: hex) else { throw ServiceError.failed("\(file) is not hex") }
        return credential
    }

    /// `securepush device list` as rows of columns, the header left out.
    func deviceList(user: String? = nil) throws -> [[String]] {
        let output = try command(["device", "list"] + (user.map { ["--user", $0] } ?? []))
        return output.split(separator: "\n").dropFirst().map { $0.split(separator: " ", omittingEmptySubsequences: true).map(String.init) }
    }
}

@Suite("The registry through the command line and the store binary", .ownThread)
struct RegistryProcessTests {
    @Test("device enroll refuses unknown users; device list shows device, user, tags, state and times; device revoke says when nothing is enrolled")
    func commands() throws {
        let store = try StoreProcess()
        let refused = try store.failing(["device", "enroll", "--user", "mallory", "--device", "x", "--out", store.deployment.directory + "/x.cred"])
        #expect(refused.contains("no user mallory"), "\(refused)")
        #expect(!FileManager.default.fileExists(atPath: store.deployment.directory + "/x.cred"))
        _ = try store.enroll("phone", tags: ["news", "eu"])
        _ = try store.enroll("bobs", user: "bob")
        let again = try store.command(["device", "enroll", "--user", "alice", "--device", "phone", "--out", store.deployment.directory + "/p2.cred"])
        #expect(again.contains("is revoked"), "\(again)")
        let rows = try store.deviceList()
        #expect(rows.map { Array($0.prefix(4)) } == [["bobs", "bob", "-", "enrolled"], ["phone", "alice", "news,eu", "revoked"],
                                                     ["phone", "alice", "-", "enrolled"]], "\(rows)")
        #expect(rows.allSatisfy { $0.count == 6 && $0[4].contains("T") && $0[5] > $0[4] }, "ISO-8601 issue and expiry times: \(rows)")
        #expect(try store.deviceList(user: "bob").map(\.first) == ["bobs"])

        #expect(try store.command(["device", "revoke", "bobs"]).contains("revoked device bobs of user bob"))
        let none = try store.failing(["device", "revoke", "bobs"])
        #expect(none.contains("no enrolled device bobs"), "\(none)")
        #expect(try store.deviceList(user: "bob").map { $0[3] } == ["revoked"])
    }

    @Test("[4.6-4] [7.3-3] against the binary: an unenrolled device cannot LOGIN, and a token stops working once `device revoke` has run")
    func revokeReachesTheRunningStore() throws {
        let store = try StoreProcess()
        let device = try store.device()
        let login = Message.login(Login(user: "alice", password: Array("alice-pw".utf8), deviceID: "phone"))
        #expect(errorStatus(try device.request(login)) == .badCredentials)
        _ = try store.enroll("phone")
        guard case .loginOK(let ok) = try device.request(login) else { Issue.record("the enrolled device was refused"); return }
        let id = try store.store("for alice's phone")
        #expect(try store.fetched(id, token: ok.token, on: device) == "for alice's phone")
        try store.command(["device", "revoke", "phone"])
        // The store checks for changes before each request: within a second at most.
        #expect(waitUntil(timeoutSeconds: 5) { (try? errorStatus(device.request(.fetch(Fetch(id: id, token: ok.token))))) == .badToken })
        #expect(errorStatus(try device.request(login)) == .badCredentials)
        #expect(waitUntil { store.service.standardErrorText().contains("token revoked") })
    }

    @Test("[4.16-8] a gateway's held REGISTRY hears of a `device revoke` and of a `user remove` promptly; device list shows them")
    func longPollAcrossProcesses() throws {
        let store = try StoreProcess()
        let phone = try store.enroll("phone")
        let tablet = try store.enroll("tablet")
        let bobs = try store.enroll("bobs", user: "bob")
        let gateway = try store.gateway()
        let loaded = try #require(registryReply(try gateway.request(.registry(RegistryRequest(waitMs: 30_000)))))
        #expect(loaded.entries.map(\.credential) == [phone, tablet, bobs] && loaded.cursor == 3)

        let held = try gateway.send(.registry(RegistryRequest(cursor: loaded.cursor, waitMs: 30_000)))
        try store.command(["device", "revoke", "bobs"])
        let revoked = try #require(registryReply(try gateway.reply(to: held, timeoutMs: 10_000)))
        #expect(revoked.entries == [RegistryEntry(state: .revoked, credential: bobs)] && revoked.cursor == 4)

        let next = try gateway.send(.registry(RegistryRequest(cursor: revoked.cursor, waitMs: 30_000)))
        #expect(try store.command(["user", "remove", "alice"]).contains("2 devices revoked"))
        var seen: [RegistryEntry] = []
        var cursor = revoked.cursor
        var waiting: UInt32? = next
        while seen.count < 2, let correlation = waiting {
            let page = try #require(registryReply(try gateway.reply(to: correlation, timeoutMs: 10_000)))
            seen += page.entries
            cursor = page.cursor
            waiting = seen.count < 2 ? try gateway.send(.registry(RegistryRequest(cursor: cursor, waitMs: 30_000))) : nil
        }
        #expect(Set(seen.map(\.credential)) == [phone, tablet] && seen.allSatisfy { $0.state == .revoked } && cursor == 6)
        #expect(try store.deviceList(user: "alice").map { $0[3] } == ["revoked", "revoked"])
        #expect(waitUntil { store.service.standardErrorText().contains("registry changed") })
    }
}
