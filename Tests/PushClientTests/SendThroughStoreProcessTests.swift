import Foundation
import Testing
import PushClient
import PushSecurity
import PushTestSupport
import PushWire

/// SEND across real processes (SPEC.md 4.17): `securepush store --gateway`, a gateway, a
/// device, and `securepush send` without --gateway.
@Suite("SEND through the store, as processes", .ownThread)
struct SendThroughStoreProcessTests {
    /// A device of alice at the gateway, once the gateway has loaded the registry.
    static func device(_ deployment: TemporaryDeployment, gateway: Int, registration: [UInt8]) throws -> BlockingWireClient {
        var device: BlockingWireClient?
        _ = try waitUntil(timeoutSeconds: 30) {
            let client = try BlockingWireClient(host: "127.0.0.1", port: gateway, timeoutMs: 10_000)
            guard case .helloOK = try client.hello(Hello(role: .device, credential: registration)) else { return false }
            device = client
            return true
        }
        return try #require(device)
    }

    /// Whether the PONG to a PING is all that came: a frame before it waits in the client's stash.
    static func nothingMore(_ device: BlockingWireClient) throws -> Bool {
        guard try device.request(.ping) == .pong else { return false }
        return (try? device.receive(timeoutMs: 1)) == nil
    }

    static func cli(_ deployment: TemporaryDeployment, _ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
        try SecurePushBinary.run(arguments + ["--provider-key", deployment.directory + "/" + Deployment.providerKeyFile])
    }

    @Test("[4.17-3] [4.12-2] [4.17-5] `securepush send` without --gateway: the store pushes, the device gets the id, status tells the counts, a retry with the key stores nothing")
    func sendCommandThroughTheStore() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let registration = try deployment.enroll("phone")
        let gateway = try ServiceProcess(["gateway", "--data-dir", deployment.directory])
        let store = try ServiceProcess(["store", "--data-dir", deployment.directory, "--gateway", "127.0.0.1:\(gateway.port)",
                                        "--metrics", "127.0.0.1:0"])
        defer { _ = store.terminate(); _ = gateway.terminate() }
        let device = try Self.device(deployment, gateway: gateway.port, registration: registration)

        let send = ["send", "--store", "127.0.0.1:\(store.port)", "--to", "user:alice", "--text", "the secret", "--idempotency-key", "order-17"]
        let sent = try Self.cli(deployment, send)
        #expect(sent.status == 0, "\(sent.stderr)")
        let id = try #require(sent.stdout.split(separator: "\n").first.flatMap { $0.hasPrefix("id ") ? PayloadID(hex: String($0.dropFirst(3))) : nil },
                              "\(sent.stdout)")
        let (header, message) = try device.receive()
        guard case .push(let push) = message else { Issue.record("the device got \(message)"); return }
        #expect(push.id == id.bytes)
        _ = try device.send(.deliveryAck(DeliveryAck(id: push.id)), correlation: header.correlation)

        var status = ""
        #expect(try waitUntil {
            status = try Self.cli(deployment, ["status", "--store", "127.0.0.1:\(store.port)", id.hex]).stdout
            return status.contains("push: written to 1 device(s), queued for 0")
        }, "\(status)")

        let again = try Self.cli(deployment, send)
        #expect(again.status == 0 && again.stdout.contains("id \(id.hex)") && again.stdout.contains("already sent"), "\(again.stdout)\(again.stderr)")
        #expect(store.metric("securepush_store_outbox_forwarded_total") == 1)
        #expect(store.metric("securepush_store_payloads_stored_total") == 1, "the retry stored nothing")
        #expect(try Self.nothingMore(device), "one push, no second")

        let other = try Self.cli(deployment, ["send", "--store", "127.0.0.1:\(store.port)", "--to", "user:alice", "--text", "other",
                                              "--idempotency-key", "order-17"])
        #expect(other.status != 0 && other.stderr.contains("CONFLICT"), "\(other.stdout)\(other.stderr)")
    }

    @Test("a store without --gateway refuses SEND: `securepush send` says how to send instead and exits non-zero")
    func sendWithoutAGatewayIsRefused() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let store = try ServiceProcess(["store", "--data-dir", deployment.directory])
        defer { _ = store.terminate() }
        let sent = try Self.cli(deployment, ["send", "--store", "127.0.0.1:\(store.port)", "--to", "user:alice", "--text", "x"])
        #expect(sent.status == 1 && sent.stderr.contains("--gateway"), "\(sent.stdout)\(sent.stderr)")
        #expect(sent.stdout.isEmpty)
    }

    @Test("[4.17-4] a push whose payload is recalled before a gateway took it is never handed over")
    func recalledPushesAreDropped() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let registration = try deployment.enroll("phone")
        let gatewayPort = try freeLoopbackPort()
        let store = try ServiceProcess(["store", "--data-dir", deployment.directory, "--gateway", "127.0.0.1:\(gatewayPort)",
                                        "--metrics", "127.0.0.1:0", "--loops", "2"])
        defer { _ = store.terminate() }
        let provider = try deployment.provider(store: store.port)
        guard case .sendOK(let recalled) = try provider.request(.send(SendRequest(user: "alice", payload: [1], target: .device("phone")))),
              try provider.request(.recall(Recall(id: recalled.id))) == .recallOK(RecallOK(id: recalled.id)),
              case .sendOK(let kept) = try provider.request(.send(SendRequest(user: "alice", payload: [2], target: .device("phone")))) else {
            Issue.record("SEND or RECALL failed"); return
        }
        let gateway = try ServiceProcess(["gateway", "--data-dir", deployment.directory, "--store", "127.0.0.1:\(store.port)"],
                                         listen: "127.0.0.1:\(gatewayPort)")
        defer { _ = gateway.terminate() }
        let device = try Self.device(deployment, gateway: gatewayPort, registration: registration)
        let (header, message) = try device.receive(timeoutMs: 30_000)
        guard case .push(let push) = message else { Issue.record("the device got \(message)"); return }
        #expect(push.id == kept.id.bytes, "only the push of the payload not recalled")
        _ = try device.send(.deliveryAck(DeliveryAck(id: push.id)), correlation: header.correlation)
        #expect(store.metric("securepush_store_outbox_recalled_total") == 1)
        #expect(try Self.nothingMore(device))
    }

    @Test("[4.17-4] SENDs wait while no gateway is reachable; a store SIGKILLed with them waiting hands every one over after its restart, each delivered once")
    func waitingPushesSurviveSIGKILL() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let registration = try deployment.enroll("phone")
        let storePort = try freeLoopbackPort(), gatewayPort = try freeLoopbackPort()
        // Two loops: the SENDs are committed on one, the outbox is read back at start by the other.
        let storeArguments = ["store", "--data-dir", deployment.directory, "--gateway", "127.0.0.1:\(gatewayPort)", "--metrics", "127.0.0.1:0",
                              "--loops", "2"]
        let first = try ServiceProcess(storeArguments, listen: "127.0.0.1:\(storePort)")
        var sent: Set<[UInt8]> = []
        do {
            let provider = try deployment.provider(store: storePort)
            let requests = try (0..<50).map { index in
                try provider.send(.send(SendRequest(user: "alice", payload: Array("waiting \(index)".utf8), target: .device("phone"))))
            }
            for correlation in requests {
                guard case .sendOK(let ok) = try provider.reply(to: correlation) else { Issue.record("a SEND failed"); return }
                sent.insert(ok.id.bytes)
            }
        }
        #expect(sent.count == 50)
        #expect(try waitUntil { first.metric("securepush_store_outbox_depth") == 50 })
        #expect(first.metric("securepush_store_outbox_gateway_link_up", ["loop": "0"]) == 0)
        #expect(first.metric("securepush_store_outbox_gateway_link_up", ["loop": "1"]) == 0)
        #expect(try waitUntil { first.standardErrorText().contains("cannot reach a gateway") }, "\(first.standardErrorText())")
        first.killHard()
        _ = first.child.wait(seconds: 10)

        let second = try ServiceProcess(storeArguments, listen: "127.0.0.1:\(storePort)")
        let gateway = try ServiceProcess(["gateway", "--data-dir", deployment.directory, "--store", "127.0.0.1:\(storePort)"],
                                         listen: "127.0.0.1:\(gatewayPort)")
        defer { _ = second.terminate(); _ = gateway.terminate() }
        let device = try Self.device(deployment, gateway: gatewayPort, registration: registration)
        var received: [[UInt8]] = []
        while received.count < sent.count {
            let (header, message) = try device.receive(timeoutMs: 30_000)
            guard case .push(let push) = message else { continue }
            received.append(push.id)
            _ = try device.send(.deliveryAck(DeliveryAck(id: push.id)), correlation: header.correlation)
        }
        #expect(Set(received) == sent, "every acknowledged SEND was announced")
        #expect(received.count == sent.count, "none twice")
        #expect(try waitUntil { second.metric("securepush_store_outbox_depth") == 0 })
        #expect(second.metric("securepush_store_outbox_forwarded_total") == 50)
        #expect(try Self.nothingMore(device), "no push came twice")
    }

    /// The pushes of `sent` the device receives until it has every one, each acknowledged
    /// (any other push acknowledged and left out).
    static func receiveAll(_ sent: Set<[UInt8]>, device: BlockingWireClient) throws -> [[UInt8]] {
        var received: [[UInt8]] = []
        while Set(received) != sent {
            let (header, message) = try device.receive(timeoutMs: 30_000)
            guard case .push(let push) = message else { continue }
            if sent.contains(push.id) { received.append(push.id) }
            _ = try device.send(.deliveryAck(DeliveryAck(id: push.id)), correlation: header.correlation)
        }
        return received
    }

    @Test("[4.17-4] the gateway goes down and comes back: SENDs are accepted meanwhile, wait in the outbox, and reach the device once it is back, each once")
    func gatewayDownThenBack() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let registration = try deployment.enroll("phone")
        let gatewayPort = try freeLoopbackPort()
        let store = try ServiceProcess(["store", "--data-dir", deployment.directory, "--gateway", "127.0.0.1:\(gatewayPort)",
                                        "--metrics", "127.0.0.1:0", "--loops", "1"])
        // Following the store's registry, the gateway queues a push for the enrolled device
        // while it is offline: without it, a push the store hands over before the device
        // reconnects matches no device (SPEC 1.1), and the device would learn of it by SYNC.
        let gatewayArguments = ["gateway", "--data-dir", deployment.directory, "--store", "127.0.0.1:\(store.port)"]
        var gateway: ServiceProcess? = try ServiceProcess(gatewayArguments, listen: "127.0.0.1:\(gatewayPort)")
        defer { _ = store.terminate(); _ = gateway?.terminate() }
        let provider = try deployment.provider(store: store.port)
        func sendTen(_ label: String) throws -> Set<[UInt8]> {
            var ids: Set<[UInt8]> = []
            for index in 0..<10 {
                guard case .sendOK(let ok) = try provider.request(.send(SendRequest(user: "alice", payload: Array("\(label) \(index)".utf8)))) else {
                    throw ServiceError.failed("a SEND failed")
                }
                ids.insert(ok.id.bytes)
            }
            return ids
        }

        var device = try Self.device(deployment, gateway: gatewayPort, registration: registration)
        let before = try sendTen("before")
        #expect(try Set(Self.receiveAll(before, device: device)) == before)
        // Every PUSH_ACK in before the outage: a push still unanswered when its gateway dies
        // is sent again to the next one, which is right but not what this test counts.
        #expect(try waitUntil { store.metric("securepush_store_outbox_depth") == 0 })

        gateway?.killHard()
        _ = gateway?.child.wait(seconds: 10)
        gateway = nil
        let during = try sendTen("during")
        #expect(try waitUntil { store.metric("securepush_store_outbox_depth") == 10 })
        #expect(try waitUntil { store.metric("securepush_store_outbox_gateway_link_up") == 0 })

        gateway = try ServiceProcess(gatewayArguments, listen: "127.0.0.1:\(gatewayPort)")
        device = try Self.device(deployment, gateway: gatewayPort, registration: registration)
        let received = try Self.receiveAll(during, device: device)
        #expect(received.count == during.count && Set(received) == during, "each once, none of those delivered before the outage")
        #expect(try waitUntil { store.metric("securepush_store_outbox_depth") == 0 })
        #expect(try Self.nothingMore(device))
    }
}
