import Testing
import PushClient
import PushGateway
import PushSecurity
import PushSession
import PushTestSupport
import PushWire

/// Hostile peers against the real gateway binary: the refusals and pending handshakes
/// show in its metrics, and admitted devices keep being served.
@Suite("Hostile peers against the gateway binary", .ownThread)
struct GatewayHostilePeerTests {
    @Test("[7] pending handshakes and refusals by reason are gauges and counters on /metrics; a device is served meanwhile")
    func refusalsInMetrics() throws {
        // A deadline no run reaches: the held connections stay held however late the
        // scrapes come (the deadline has a test of its own below).
        let gateway = try GatewayProcess(arguments: ["--metrics", "127.0.0.1:0", "--max-pending-per-address", "3",
                                                     "--handshake-timeout-ms", "600000"])
        let hostile = HostileConnections(port: gateway.service.port)
        // Five from one address: the gateway keeps three and closes two at once. Which two
        // is the order it accepts them in, which on a loaded machine need not be the order
        // they were opened in.
        let all = try hostile.open(5, from: "127.0.0.70")
        #expect(waitUntil { hostile.closed(among: all).count >= 2 },
                "closed: \(hostile.closed(among: all).sorted()) \((try? gateway.scrapeMetrics()) ?? "")")
        let refused = hostile.closed(among: all)
        #expect(refused.count == 2, "closed: \(refused.sorted())")
        var text = ""
        #expect(waitUntil {
            text = (try? gateway.scrapeMetrics()) ?? ""
            return text.contains(#"securepush_gateway_connections_refused_total{reason="pending_per_address"} 2"#)
                && text.contains("securepush_gateway_pending_handshakes 3")
        }, "metrics: \(text)")
        // A device from another address is admitted and pushed to while they wait.
        let phone = try gateway.device("phone")
        _ = try gateway.push(.device("phone"), id: "m", via: try gateway.provider())
        _ = try phone.nextPushID()
        #expect(hostile.closed(among: all) == refused, "the held connections are still held")
        // Peers that hang up give their places back.
        hostile.closeAll()
        #expect(waitUntil {
            text = (try? gateway.scrapeMetrics()) ?? ""
            return text.contains("securepush_gateway_pending_handshakes 0")
        }, "metrics: \(text)")
    }

    @Test("[7] connections that send no HELLO are closed at the handshake deadline, counted by reason, and the gauge falls to 0")
    func handshakeDeadlineInMetrics() throws {
        let gateway = try GatewayProcess(arguments: ["--metrics", "127.0.0.1:0", "--handshake-timeout-ms", "200"])
        let hostile = HostileConnections(port: gateway.service.port)
        let all = try hostile.open(3, from: "127.0.0.71")
        #expect(hostile.waitUntilClosed(all, timeoutMs: 30_000))
        var text = ""
        #expect(waitUntil {
            text = (try? gateway.scrapeMetrics()) ?? ""
            return text.contains(#"securepush_gateway_connections_refused_total{reason="handshake_timeout"} 3"#)
                && text.contains("securepush_gateway_pending_handshakes 0")
        }, "metrics: \(text)")
    }
}

extension GatewayHostilePeerTests {
    @Test("[7.4-3] device enroll takes the largest registration that fits, whose HELLO fits the 1,024 bytes read before HELLO_OK, and refuses a larger one")
    func enrollRefusesAnOversizedHello() throws {
        let deployment = try TemporaryDeployment(commandLine: true)
        try deployment.addUser("alice", password: "alice-pw")  // enrolment is for known users (issue 12.2)
        let signer = CredentialSigner(serverKey: deployment.deployment.serverKey, purpose: CredentialSigner.registrationPurpose)
        let tags = { (count: Int) in (0..<count).map { String(repeating: Character(String(UnicodeScalar(UInt8(97 + $0 % 26)))), count: 64) } }
        let fitting = (1...20).last { count in
            Registration(deviceID: "phone", user: "alice", tags: tags(count), issuedAt: 0, expiresAt: 1).signed(by: signer).count
                <= Registration.maxSignedBytes
        } ?? 1
        let path = deployment.directory + "/phone.cred"
        let enroll = { (count: Int) in
            try SecurePushBinary.run(["device", "enroll", "--data-dir", deployment.directory, "--user", "alice",
                                      "--device", "phone", "--out", path] + tags(count).flatMap { ["--tag", $0] })
        }
        let tooMany = try enroll(fitting + 1)
        #expect(tooMany.status != 0)
        #expect(tooMany.stderr.contains("before HELLO_OK"), "\(tooMany.stderr)")
        let largest = try enroll(fitting)
        #expect(largest.status == 0, "\(largest.stderr)")
        let text = try Deployment.readFile(path).filter { !$0.isWhitespace }
        let credential = try #require([UInt8](hex: text))
        let hello = Message.hello(Hello(role: .device, credential: credential, name: String(repeating: "n", count: 32)))
        #expect(hello.encoded(correlation: 1).count <= ServiceLimits.maxFrameBeforeHello)
    }
}

extension GatewayHostilePeerTests {
    @Test("gateway.* and bare config keys set the gateway's deadlines and pending caps")
    func gatewayKeys() throws {
        let temporary = try TemporaryDeployment()
        let path = temporary.directory + "/" + Deployment.configFile
        let text = try String(contentsOfFile: path, encoding: .utf8)
            + "gateway.frame_timeout_ms = 2500\nhandshake_timeout_ms = 3000\ngateway.max_pending_per_address = 9\nstore.max_pending_handshakes = 5\n"
        try Deployment.writePrivate(path, text)
        let configuration = GatewayConfiguration(deployment: try Deployment.open(temporary.directory), host: "127.0.0.1", port: 0)
        #expect(configuration.limits.timeouts == SessionTimeouts(handshakeMs: 3_000, frameMs: 2_500))
        #expect(configuration.limits.maxPendingPerAddress == 9)
        #expect(configuration.limits.maxPendingHandshakes == 1_024, "another service's key does not apply")
    }
}
