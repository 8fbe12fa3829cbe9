import Foundation
import Testing
import PushSecurity
import PushTestSupport
import PushWire

@Suite("securepush send, as a process", .ownThread)
struct SendCommandTests {
    static func send(file: String, deployment: TemporaryDeployment, store: String, gateway: String) throws -> (status: Int32, stdout: String, stderr: String) {
        try SecurePushBinary.run(["send", "--store", store, "--gateway", gateway,
                                  "--provider-key", deployment.directory + "/" + Deployment.providerKeyFile,
                                  "--to", "user:alice", "--file", file], timeoutSeconds: 60)
    }

    @Test("a payload file too large for the store's frame: one clear line on stderr and a non-zero exit, never a crash")
    func largePayloadFiles() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let store = try InProcessStore(deployment)
        let gateway = try InProcessGateway(deployment)
        let storeAddress = "\(store.host):\(store.port)", gatewayAddress = "\(gateway.host):\(gateway.port)"

        let small = deployment.directory + "/small.bin"
        _ = FileManager.default.createFile(atPath: small, contents: Data(repeating: 0x41, count: 4_000))
        let fits = try Self.send(file: small, deployment: deployment, store: storeAddress, gateway: gatewayAddress)
        #expect(fits.status == 0, "\(fits.stderr)")
        #expect(fits.stdout.hasPrefix("id "))

        for size in [64 * 1024, 256 * 1024, 1024 * 1024] {
            let path = deployment.directory + "/payload-\(size).bin"
            _ = FileManager.default.createFile(atPath: path, contents: Data(repeating: 0x42, count: size))
            let result = try Self.send(file: path, deployment: deployment, store: storeAddress, gateway: gatewayAddress)
            let lines = result.stderr.split(separator: "\n")
            #expect(result.status == 1, "\(size) bytes: exit \(result.status), \(result.stderr)")
            #expect(lines.count == 1, "\(size) bytes: one line, not \(result.stderr)")
            #expect(lines.first?.contains("the payload (\(size) bytes) is too large") == true, "\(result.stderr)")
            #expect(result.stdout.isEmpty, "nothing was sent")
        }
    }

    @Test("a file larger than any frame can be is refused before connecting")
    func fileBeyondAnyFrame() throws {
        let deployment = try TemporaryDeployment()
        let path = deployment.directory + "/huge.bin"
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.truncate(atOffset: UInt64(FrameLimits.ceiling + 1))  // sparse: no 16 MiB written
        try handle.close()
        // Nothing listens on port 1: the refusal must come before any connection.
        let result = try Self.send(file: path, deployment: deployment, store: "127.0.0.1:1", gateway: "127.0.0.1:1")
        #expect(result.status == 1)
        #expect(result.stderr.split(separator: "\n").count == 1)
        #expect(result.stderr.contains("no securepush frame can carry"), "\(result.stderr)")
    }
}
