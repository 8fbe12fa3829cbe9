import Foundation
import Testing
import PushClient
import PushSecurity
import PushTestSupport

/// The client commands given `--store HOST:PORT,HOST:PORT`: they pass over a store that
/// does not answer, fail once none does naming each, and refuse a malformed list naming
/// the bad element.
@Suite("Store failover: the client commands", .ownThread, .serialized)
struct StoreFailoverCommandTests {
    private func run(_ arguments: [String], stdin: String? = nil) throws -> (status: Int32, stdout: String, stderr: String) {
        try SecurePushBinary.run(arguments, stdin: stdin, timeoutSeconds: 30)
    }

    @Test("send, status, recall and device login go through the live store of DEAD,LIVE")
    func deadThenLive() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        _ = try deployment.enrolledRegistration("phone")
        let store = try InProcessStore(deployment)
        let gateway = try InProcessGateway(deployment)
        let list = "127.0.0.1:\(try readmeFreePort()),127.0.0.1:\(store.port)"
        let key = deployment.directory + "/" + Deployment.providerKeyFile

        let sent = try run(["send", "--store", list, "--gateway", "127.0.0.1:\(gateway.port)", "--provider-key", key,
                            "--to", "user:alice", "--text", "hello", "--timeout", "10"])
        #expect(sent.status == 0, "\(sent.stderr)")
        let id = sent.stdout.split(separator: "\n").first { $0.hasPrefix("id ") }.map { String($0.dropFirst(3)) } ?? ""
        #expect(id.count == 32, "\(sent.stdout)")

        let status = try run(["status", "--store", list, "--provider-key", key, "--timeout", "10", id])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stdout.hasPrefix("\(id) stored"), "\(status.stdout)")
        let recalled = try run(["recall", "--store", list, "--provider-key", key, "--timeout", "10", id])
        #expect(recalled.status == 0, "\(recalled.stderr)")

        let state = deployment.directory + "/phone-state"
        let login = try run(["device", "login", "--store", list, "--user", "alice", "--device", "phone", "--state-dir", state,
                             "--timeout", "10"], stdin: "alice-pw\n")
        #expect(login.status == 0, "\(login.stderr)")
        #expect(login.stdout.contains("logged in as alice on phone"), "\(login.stdout)")
        #expect(TokenStore(directory: state).load() != nil)
    }

    @Test("no store of the list answers: the command fails once every one has, naming each address")
    func noneAnswers() throws {
        let deployment = try TemporaryDeployment()
        let first = try readmeFreePort()
        let second = try readmeFreePort()
        let status = try run(["status", "--store", "127.0.0.1:\(first),127.0.0.1:\(second)",
                              "--provider-key", deployment.directory + "/" + Deployment.providerKeyFile, "--timeout", "10",
                              String(repeating: "ab", count: 16)])
        #expect(status.status != 0)
        #expect(status.stderr.contains("none of the 2 store addresses answered"), "\(status.stderr)")
        #expect(status.stderr.contains("cannot reach the store at 127.0.0.1:\(first)"), "\(status.stderr)")
        #expect(status.stderr.contains("cannot reach the store at 127.0.0.1:\(second)"), "\(status.stderr)")
        #expect(!status.stderr.contains("timed out"), "it gives up after one round, not at the deadline: \(status.stderr)")
    }

    @Test("a malformed --store list is refused before anything connects, naming the element, for every command that takes one")
    func malformedLists() throws {
        let deployment = try TemporaryDeployment()
        let key = deployment.directory + "/" + Deployment.providerKeyFile
        let id = String(repeating: "ab", count: 16)
        let commands: [(String) -> [String]] = [
            { ["send", "--store", $0, "--gateway", "127.0.0.1:7071", "--provider-key", key, "--to", "user:alice", "--text", "x"] },
            { ["status", "--store", $0, "--provider-key", key, id] },
            { ["recall", "--store", $0, "--provider-key", key, id] },
            { ["device", "run", "--store", $0, "--gateway", "127.0.0.1:7071", "--credential", key] },
            { ["device", "login", "--store", $0, "--user", "alice", "--device", "phone"] },
        ]
        let lists: [(String, String)] = [
            ("127.0.0.1:7070,,127.0.0.1:7072", "address 2 of 3 is empty"),
            ("127.0.0.1:7070,store-2", "address 2 of 2, 'store-2', is not HOST:PORT"),
            ("[::1]:7070,::1:7071", "address 2 of 2, '::1:7071', is not HOST:PORT: an IPv6 address goes in brackets"),
            ("127.0.0.1:7070,127.0.0.1:0", "--store needs the store's port, not 0 (address 2 of 2)"),
        ]
        for command in commands {
            for (list, words) in lists {
                let result = try run(command(list))
                #expect(result.status == 64, "\(command(list)): \(result.stderr)")
                #expect(result.stderr.contains(words), "\(command(list)): \(result.stderr)")
            }
        }
        let help = try run(["device", "run", "--help"])
        #expect(help.stdout.contains("HOST:PORT,HOST:PORT"), "\(help.stdout)")
    }
}
