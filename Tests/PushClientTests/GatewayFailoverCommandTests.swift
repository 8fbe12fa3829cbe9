import Foundation
import Testing
import PushClient
import PushSecurity
import PushTestSupport

/// The client commands given `--gateway HOST:PORT,HOST:PORT` (the nodes of a cluster):
/// they pass over a gateway that does not answer, fail once none does naming each, and
/// refuse a malformed list naming the bad element.
@Suite("Gateway failover: the client commands", .ownThread, .serialized)
struct GatewayFailoverCommandTests {
    private func run(_ arguments: [String], stdin: String? = nil) throws -> (status: Int32, stdout: String, stderr: String) {
        try SecurePushBinary.run(arguments, stdin: stdin, timeoutSeconds: 30)
    }

    @Test("device run and send go through the live gateway of DEAD,LIVE; the device says which gateway it is on")
    func deadThenLive() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let store = try InProcessStore(deployment)
        let gateway = try InProcessGateway(deployment)
        let list = "127.0.0.1:\(try readmeFreePort()),127.0.0.1:\(gateway.port)"
        let device = try DeviceRunProcess(deployment: deployment, device: "phone", user: "alice", password: "alice-pw",
                                          registration: try deployment.enrolledRegistration("phone"), store: store,
                                          gatewayAddress: list)
        defer { _ = device.stopAndCollect() }
        let connected = "connected to the gateway at 127.0.0.1:\(gateway.port) as phone"
        #expect(waitUntil(timeoutSeconds: 15) { device.child.standardError.contains(connected) }, "\(device.child.standardError)")
        #expect(waitUntil(timeoutSeconds: 10) { gateway.isOnline("phone") })

        let key = deployment.directory + "/" + Deployment.providerKeyFile
        let sent = try run(["send", "--store", "127.0.0.1:\(store.port)", "--gateway", list, "--provider-key", key,
                            "--to", "user:alice", "--text", "via the second gateway", "--timeout", "10"])
        #expect(sent.status == 0, "\(sent.stderr)")
        #expect(sent.stdout.contains("written to 1 device(s)"), "\(sent.stdout)")
        #expect(waitUntil(timeoutSeconds: 10) { device.shownCount == 1 })
        let shown = device.stopAndCollect()
        #expect(shown.map(\.text) == ["via the second gateway"], "\(shown)")
    }

    @Test("no gateway of the list answers: send fails once every one has, naming each address")
    func noneAnswers() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let store = try InProcessStore(deployment)
        let first = try readmeFreePort()
        let second = try readmeFreePort()
        let sent = try run(["send", "--store", "127.0.0.1:\(store.port)", "--gateway", "127.0.0.1:\(first),127.0.0.1:\(second)",
                            "--provider-key", deployment.directory + "/" + Deployment.providerKeyFile, "--to", "user:alice",
                            "--text", "nowhere", "--timeout", "10"])
        #expect(sent.status != 0)
        #expect(sent.stderr.contains("none of the 2 gateway addresses answered"), "\(sent.stderr)")
        #expect(sent.stderr.contains("cannot reach the gateway at 127.0.0.1:\(first)"), "\(sent.stderr)")
        #expect(sent.stderr.contains("cannot reach the gateway at 127.0.0.1:\(second)"), "\(sent.stderr)")
        #expect(!sent.stderr.contains("timed out"), "it gives up after one round, not at the deadline: \(sent.stderr)")
    }

    @Test("a malformed --gateway list is refused before anything connects, naming the element; the help says comma-separated")
    func malformedLists() throws {
        let deployment = try TemporaryDeployment()
        let key = deployment.directory + "/" + Deployment.providerKeyFile
        let commands: [(String) -> [String]] = [
            { ["send", "--store", "127.0.0.1:7070", "--gateway", $0, "--provider-key", key, "--to", "user:alice", "--text", "x"] },
            { ["device", "run", "--store", "127.0.0.1:7070", "--gateway", $0, "--credential", key] },
        ]
        let lists: [(String, String)] = [
            ("127.0.0.1:7071,,127.0.0.1:7073", "address 2 of 3 is empty"),
            ("127.0.0.1:7071,node-2", "address 2 of 2, 'node-2', is not HOST:PORT"),
            ("127.0.0.1:7071,127.0.0.1:0", "--gateway needs the gateway's port, not 0 (address 2 of 2)"),
        ]
        for command in commands {
            for (list, words) in lists {
                let result = try run(command(list))
                #expect(result.status == 64, "\(command(list)): \(result.stderr)")
                #expect(result.stderr.contains(words), "\(command(list)): \(result.stderr)")
            }
        }
        for help in [["device", "run", "--help"], ["send", "--help"]] {
            let text = try run(help).stdout.replacingOccurrences(of: "\n", with: " ").split(separator: " ").joined(separator: " ")
            #expect(text.contains("gateway cluster may be given comma-separated"), "\(help): \(text)")
        }
    }
}
