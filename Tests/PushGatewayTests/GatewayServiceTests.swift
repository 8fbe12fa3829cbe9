import Foundation
import PushGateway
import Testing
import PushClient
import PushSecurity
import PushTestSupport
import PushWire

/// A gateway under test, and helpers to connect devices and providers to it.
protocol GatewayUnderTest {
    var deployment: TemporaryDeployment { get }
    var reachable: any ReachableService { get }
}

extension GatewayUnderTest {
    func device(_ id: String, user: String = "alice", tags: [String] = [], receiveBufferBytes: Int32? = nil) throws -> BlockingWireClient {
        let client = try reachable.connect(receiveBufferBytes: receiveBufferBytes)
        let reply = try client.hello(Hello(role: .device, credential: deployment.registration(id, user: user, tags: tags)))
        guard case .helloOK = reply else { throw ServiceError.failed("device HELLO refused: \(reply)") }
        return client
    }

    func provider() throws -> BlockingWireClient {
        let client = try reachable.connect()
        let reply = try client.hello(Hello(role: .provider, credential: deployment.providerCredential(for: .gateway)))
        guard case .helloOK = reply else { throw ServiceError.failed("provider HELLO refused: \(reply)") }
        return client
    }

    func push(_ target: PushTarget, id: String, via provider: BlockingWireClient, ttl: UInt32 = 60, collapse: String? = nil) throws -> PushAck {
        let reply = try provider.request(.push(Push(target: target, id: Array(id.utf8), collapseKey: collapse, ttlSeconds: ttl)))
        guard case .pushAck(let ack) = reply else { throw ServiceError.failed("PUSH refused: \(reply)") }
        return ack
    }
}

/// A gateway in this process, on a clock the test can move forward, whose metrics the
/// test can read.
final class RunningGateway: GatewayUnderTest {
    let deployment: TemporaryDeployment
    let clock = ManualClock()
    let service: InProcessGateway

    init(configure: (inout GatewayConfiguration) -> Void = { _ in }) throws {
        deployment = try TemporaryDeployment()
        service = try InProcessGateway(deployment) { [clock] in
            $0.wallClock = clock.wallMilliseconds
            $0.monotonicClock = clock.monotonicMilliseconds
            configure(&$0)
        }
    }

    var reachable: any ReachableService { service }

    /// The metrics in the Prometheus text format.
    var metricsText: String { service.onLoop { $0.metrics.text } ?? "" }

    /// A device that connects, is seen by the gateway, and goes away again.
    func knownOffline(_ id: String) throws {
        try device(id).shutdownWrite()
        #expect(waitUntil { service.isOffline(id) }, "the gateway saw \(id) leave")
    }
}

extension BlockingWireClient {
    /// The next PUSH, acknowledged unless told otherwise; MISSED frames are returned too.
    func nextPush(acknowledge: Bool = true, timeoutMs: Int32 = 3_000) throws -> (correlation: UInt32, message: Message) {
        while true {
            let frame = try receive(timeoutMs: timeoutMs)
            switch frame.message {
            case .push(let push):
                if acknowledge { try send(.deliveryAck(DeliveryAck(id: push.id)), correlation: frame.header.correlation) }
                return (frame.header.correlation, frame.message)
            case .missed, .goaway:
                return (frame.header.correlation, frame.message)
            case .ping:
                try send(.pong, correlation: frame.header.correlation)
            default:
                continue
            }
        }
    }

    func nextPushID(acknowledge: Bool = true) throws -> String? {
        guard case .push(let push) = try nextPush(acknowledge: acknowledge).message else { return nil }
        return String(decoding: push.id, as: UTF8.self)
    }
}

@Suite("Gateway service over real sockets, in-process", .ownThread)
struct GatewayServiceTests {
    @Test("[4.13-3] delivery to one device, to a user with three devices, and to a tag")
    func delivery() throws {
        let gateway = try RunningGateway()
        let phone = try gateway.device("phone", tags: ["news"])
        let tablet = try gateway.device("tablet")
        let laptop = try gateway.device("laptop", tags: ["news"])
        let provider = try gateway.provider()
        #expect(try gateway.push(.device("phone"), id: "one", via: provider) == PushAck(written: 1, queued: 0))
        #expect(try phone.nextPushID() == "one")
        #expect(try gateway.push(.user("alice"), id: "all", via: provider) == PushAck(written: 3, queued: 0))
        for device in [phone, tablet, laptop] { #expect(try device.nextPushID() == "all") }
        #expect(try gateway.push(.tag("news"), id: "tagged", via: provider) == PushAck(written: 2, queued: 0))
        #expect(try phone.nextPushID() == "tagged")
        #expect(try laptop.nextPushID() == "tagged")
        #expect(throws: BlockingWireClient.Failure.timedOut) { try tablet.receive(timeoutMs: 200) }
    }

    @Test("[4.13-5] offline queue with collapse, overflow and [4.15-1] MISSED on reconnect")
    func offlineQueue() throws {
        let gateway = try RunningGateway { $0.queueCapacity = 3 }
        let provider = try gateway.provider()
        try gateway.knownOffline("phone")
        #expect(try gateway.push(.device("phone"), id: "score-1", via: provider, collapse: "score") == PushAck(written: 0, queued: 1))
        #expect(try gateway.push(.device("phone"), id: "score-2", via: provider, collapse: "score") == PushAck(written: 0, queued: 1))
        for index in 1...3 { _ = try gateway.push(.device("phone"), id: "m\(index)", via: provider) }
        #expect(try gateway.push(.device("phone"), id: "live-only", via: provider, ttl: 0) == PushAck(written: 0, queued: 0))
        let phone = try gateway.device("phone")
        #expect(try phone.nextPush().message == .missed(Missed(missedCount: 1)), "score-2 was dropped for room")
        #expect(try [phone.nextPushID(), phone.nextPushID(), phone.nextPushID()] == ["m1", "m2", "m3"])
        #expect(throws: BlockingWireClient.Failure.timedOut) { try phone.receive(timeoutMs: 200) }
    }

    @Test("[4.13-5] a queued push past its TTL is dropped and counted as missed")
    func ttlExpiry() throws {
        let gateway = try RunningGateway()
        let provider = try gateway.provider()
        try gateway.knownOffline("phone")
        #expect(try gateway.push(.device("phone"), id: "short", via: provider, ttl: 1) == PushAck(written: 0, queued: 1))
        gateway.clock.advance(byMs: 1_500)
        let phone = try gateway.device("phone")
        #expect(try phone.nextPush().message == .missed(Missed(missedCount: 1)))
        #expect(throws: BlockingWireClient.Failure.timedOut) { try phone.receive(timeoutMs: 200) }
    }

    @Test("[4.14-3] a push not acknowledged is delivered again after reconnect")
    func redelivery() throws {
        let gateway = try RunningGateway()
        let provider = try gateway.provider()
        let first = try gateway.device("phone")
        _ = try gateway.push(.device("phone"), id: "unacked", via: provider)
        let original = try first.nextPush(acknowledge: false)
        first.shutdownWrite()
        #expect(waitUntil { gateway.service.isOffline("phone") })
        let second = try gateway.device("phone")
        let again = try second.nextPush()
        #expect(again.message == original.message && again.correlation == original.correlation)
        let third = try gateway.device("phone")
        #expect(throws: BlockingWireClient.Failure.self, "acknowledged now, so not again") { try third.nextPush(timeoutMs: 300) }
    }

    @Test("[5.5-3] a second connection with the same device id replaces the first with GOAWAY REPLACED")
    func replacement() throws {
        let gateway = try RunningGateway()
        let first = try gateway.device("phone")
        _ = try gateway.device("phone")
        guard case .goaway(let goaway) = try first.nextPush().message else { Issue.record("no GOAWAY"); return }
        #expect(goaway.status == .replaced)
        #expect(first.waitForClose())
    }

    @Test("[3.4-6] a PUSH carrying a payload field, or any extra bytes, is refused")
    func pushWithPayloadRefused() throws {
        let gateway = try RunningGateway()
        let provider = try gateway.provider()
        var body: [UInt8] = [0x15, 2, 0x41, 0x42, 0x30, 1, 2, 0x31, 5] + Array("alice".utf8)
        body += [0x16, 6] + Array("secret".utf8)
        var frame: [UInt8] = [0xA7, 1, 0x20, 0, 0, 0, 0, 9, 0, 0, 0, 0]
        frame += withUnsafeBytes(of: UInt32(body.count).bigEndian, Array.init)
        try provider.sendRaw(frame + body)
        let reply = try provider.receive()
        #expect(reply.header.correlation == 9)
        guard case .error(let error) = reply.message else { Issue.record("accepted: \(reply.message)"); return }
        #expect(error.status == .badRequest)
        #expect(try gateway.push(.user("alice"), id: "fine", via: provider) == PushAck(written: 0, queued: 0))
    }

    @Test("[4.1-3] a device cannot PUSH; [4.13-2] a PUSH without target is refused")
    func roles() throws {
        let gateway = try RunningGateway()
        let phone = try gateway.device("phone")
        guard case .error(let error) = try phone.request(.push(Push(target: .user("alice"), id: [1]))) else { Issue.record("accepted"); return }
        #expect(error.status == .forbidden)
        guard case .error(let missing) = try gateway.provider().request(.push(Push(target: nil, id: [1]))) else { Issue.record("accepted"); return }
        #expect(missing.status == .badRequest)
    }

    @Test("[4.2-4] a forged or expired registration, and a missing one, are refused")
    func badRegistrations() throws {
        let gateway = try RunningGateway()
        let tokenSigner = CredentialSigner(serverKey: gateway.deployment.deployment.serverKey, purpose: CredentialSigner.fetchTokenPurpose)
        let forged = Registration(deviceID: "x", user: "alice", tags: [], issuedAt: 0, expiresAt: .max).signed(by: tokenSigner)
        let regSigner = CredentialSigner(serverKey: gateway.deployment.deployment.serverKey, purpose: CredentialSigner.registrationPurpose)
        let expired = Registration(deviceID: "x", user: "alice", tags: [], issuedAt: 0, expiresAt: 1).signed(by: regSigner)
        for (credential, status) in [(forged, Status.badCredentials), (expired, .badCredentials)] {
            let client = try gateway.service.connect()
            guard case .error(let error) = try client.hello(Hello(role: .device, credential: credential)) else { Issue.record("accepted"); continue }
            #expect(error.status == status)
            #expect(client.waitForClose())
        }
        let bare = try gateway.service.connect()
        guard case .error(let error) = try bare.hello(Hello(role: .device)) else { Issue.record("accepted"); return }
        #expect(error.status == .badRequest, "[4.2-2]")
    }

    @Test("the counters and gauges reach the metrics factory, without notification ids")
    func metricsCounted() throws {
        let gateway = try RunningGateway()
        let phone = try gateway.device("phone")
        _ = try gateway.push(.device("phone"), id: "m", via: try gateway.provider())
        _ = try phone.nextPushID()
        #expect(waitUntil { gateway.metricsText.contains("securepush_gateway_pushes_acknowledged_total 1") })
        let text = gateway.metricsText
        #expect(text.contains("securepush_gateway_pushes_accepted_total 1"))
        #expect(text.contains("securepush_gateway_pushes_written_total 1"))
        #expect(text.contains("securepush_gateway_devices_online 1"))
        #expect(!text.contains("6d"), "no notification ids in metrics") // "m" is 0x6d
    }

    @Test("every malformed vector gets its documented outcome while the gateway keeps serving others")
    func malformedVectors() throws {
        let gateway = try RunningGateway()
        let failures = malformedVectorFailures(service: gateway.service, hello: { Hello(role: .provider, credential: gateway.deployment.providerCredential(for: .gateway), maxFrame: UInt32($0)) },
                                               bystander: try gateway.device("bystander"))
        #expect(failures.isEmpty, "\(failures)")
    }

    @Test("[5.5-1] a drain sends GOAWAY SHUTTING_DOWN to every connection and closes them")
    func drain() throws {
        let gateway = try RunningGateway()
        let phone = try gateway.device("phone")
        let provider = try gateway.provider()
        gateway.service.stop()
        for client in [phone, provider] {
            guard case .goaway(let goaway) = try client.nextPush().message else { Issue.record("no GOAWAY"); continue }
            #expect(goaway.status == .shuttingDown)
            #expect(client.waitForClose())
        }
    }

    @Test("device enroll writes an owner-only credential the gateway accepts")
    func enrollCommand() throws {
        let gateway = try RunningGateway()
        try gateway.deployment.addUser("alice", password: "alice-pw")  // enrolment is for known users (issue 12.2)
        let path = gateway.deployment.directory + "/phone.cred"
        let result = try SecurePushBinary.run(["device", "enroll", "--data-dir", gateway.deployment.directory, "--user", "alice",
                                               "--device", "phone", "--tag", "news", "--out", path])
        #expect(result.status == 0, "\(result.stderr)")
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        let credential = try #require([UInt8](hex: try String(contentsOfFile: path, encoding: .utf8).filter { !$0.isWhitespace }))
        let client = try gateway.service.connect()
        guard case .helloOK = try client.hello(Hello(role: .device, credential: credential)) else { Issue.record("refused"); return }
        #expect(try gateway.push(.tag("news"), id: "hi", via: try gateway.provider()) == PushAck(written: 1, queued: 0))
        let bad = try SecurePushBinary.run(["device", "enroll", "--data-dir", gateway.deployment.directory, "--user", "alice",
                                            "--device", "", "--out", path])
        #expect(bad.status != 0 && !bad.stderr.isEmpty, "status \(bad.status) stdout \(bad.stdout) stderr \(bad.stderr)")
    }
}

