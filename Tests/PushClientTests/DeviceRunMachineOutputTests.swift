import Foundation
import Testing
import PushClient
import PushEventLoop
import PushProcess
import PushSecurity
import PushTestSupport
import PushWire

/// `securepush device run --output machine` (Appendix B.2) as a child process, between a
/// scripted gateway and store on the test's loop.
@Suite("device run --output machine", .ownThread, .serialized)
struct DeviceRunMachineOutputTests {
    @Test("stdout holds exactly one SHOWN line per notification: content in lowercase hex, nothing after PAYLOAD for empty content, GENERIC for a refused token")
    func machineLines() throws {
        let fixture = try ScriptedDeviceFixture()
        let (x, empty, refused) = (ScriptedDeviceFixture.id(1), ScriptedDeviceFixture.id(2), ScriptedDeviceFixture.id(3))
        fixture.store.payloads[x] = [0x00, 0xAB, 0x7F]
        fixture.store.payloads[empty] = []
        fixture.store.override = { peer, message, correlation in
            guard case .fetch(let fetch) = message, fetch.id == refused else { return false }
            peer.send(.error(ErrorReply(status: .badToken)), correlation: correlation)
            return true
        }
        let credential = fixture.directory + "/device.cred"
        try Deployment.writePrivate(credential, fixture.registration.hexString + "\n")
        let child = try ChildProcess(executable: SecurePushBinary.path, arguments: [
            "device", "run", "--gateway", "127.0.0.1:\(fixture.gateway.port)", "--store", "127.0.0.1:\(fixture.store.server.port)",
            "--credential", credential, "--state-dir", fixture.directory, "--output", "machine",
        ])
        defer { _ = child.terminate(graceSeconds: 2) }
        #expect(fixture.waitUntilConnected(), "stderr: \(child.standardErrorTail)")
        fixture.push(x, correlation: 0x2001)
        fixture.push(empty, correlation: 0x2002)
        #expect(fixture.loop.run(until: { fixture.store.requests(.ack).count == 2 }))
        fixture.push(refused, correlation: 0x2003)
        #expect(fixture.loop.run(until: { child.standardOutput.split(separator: "\n").count == 3 }, timeoutSeconds: 5))
        #expect(child.terminate(graceSeconds: 5) == 0)
        #expect(child.standardOutput == """
            SHOWN \(x.hex) PAYLOAD 00ab7f
            SHOWN \(empty.hex) PAYLOAD
            SHOWN \(refused.hex) GENERIC

            """, "stderr: \(child.standardErrorTail)")
        #expect(!fixture.store.requests(.ack).contains { $0.id == refused })
    }
}
