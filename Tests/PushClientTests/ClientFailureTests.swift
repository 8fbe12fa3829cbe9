import Foundation
import Testing
import PushClient
import PushEventLoop
import PushSecurity
import PushSession
import PushTestSupport
import PushWire

/// Addresses by name and over IPv6, and the failures a client names and classifies:
/// GOAWAY reasons, TLS on one side only, credentials the server refuses.
@Suite("Client addresses and failures", .ownThread, .serialized)
struct ClientFailureTests {
    /// A registration for `device`, signed with `deployment`'s server key.
    private func registration(_ deployment: TemporaryDeployment, _ device: String) -> [UInt8] {
        deployment.registration(device, lifetimeMs: 3_600_000)
    }

    private func startDevice(loop: EventLoop, gateway: ServerLink.Endpoint, store: ServerLink.Endpoint, registration: [UInt8],
                             id: String, events: @escaping (DeviceEvent) -> Void) -> DeviceClient {
        let device = DeviceClient(loop: loop, gateway: gateway, store: store, registration: registration, deviceID: id, tokenStore: nil)
        device.onEvent = events
        device.start()
        return device
    }

    @Test("a store on [::1] and a gateway on localhost serve a provider and a device that connect by those names")
    func namesAndIPv6() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let store = try InProcessStore(deployment) { $0.host = "::1" }
        let gateway = try InProcessGateway(deployment) { $0.host = "localhost" }
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let storeEndpoint = ServerLink.Endpoint(HostPort(host: "::1", port: store.port))
        let gatewayEndpoint = ServerLink.Endpoint(HostPort(host: "localhost", port: gateway.port))

        var events: [DeviceEvent] = []
        let device = startDevice(loop: loop, gateway: gatewayEndpoint, store: storeEndpoint,
                                 registration: registration(deployment, "phone"), id: "phone") { events.append($0) }
        defer { device.stop() }
        var shown: [DeviceNotification] = []
        device.onNotification = { shown.append($0) }
        #expect(loop.run(until: { events.contains(.gatewayConnected) && events.contains(.storeConnected) }))

        let provider = ProviderClient(loop: loop, store: storeEndpoint, gateway: gatewayEndpoint,
                                      providerKey: deployment.deployment.providerKey)
        defer { provider.stop() }
        var receipt: Result<SendReceipt, ClientError>?
        provider.send(ProviderClient.SecureMessage(recipient: "alice", payload: Array("over names".utf8))) { receipt = $0 }
        #expect(loop.run(until: { receipt != nil }))
        #expect(try receipt?.get().delivery.written == 1)
        // No fetch token: the device shows the generic prompt for the ID it was pushed.
        #expect(loop.run(until: { !shown.isEmpty }))
        #expect(shown.first?.id == (try? receipt?.get().id))
    }

    @Test("a name that does not resolve fails a provider's requests with the resolver's words, once, and for good")
    func unresolvableName() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let nowhere = ServerLink.Endpoint(HostPort(host: "nohost.invalid", port: 7070))
        let provider = ProviderClient(loop: loop, store: nowhere, gateway: nowhere, providerKey: try SecretKey.generate())
        defer { provider.stop() }
        var downs: [ClientError] = []
        provider.onConnectionError = { _, error in downs.append(error) }
        var result: Result<StatusOK, ClientError>?
        provider.status(PayloadID(bytes: Array(repeating: 1, count: 16))!) { result = $0 }
        #expect(loop.run(until: { result != nil }))
        guard case .failure(.connect(.cannotResolve(let host, _, let temporary)))? = result else {
            Issue.record("expected a resolution failure, got \(String(describing: result))")
            return
        }
        #expect(host == "nohost.invalid")
        if !temporary {
            #expect(result.map { if case .failure(let error) = $0 { error.isPermanent } else { false } } == true)
            // Stopped for good: a later request fails at once with the same error.
            var later: Result<StatusOK, ClientError>?
            provider.status(PayloadID(bytes: Array(repeating: 2, count: 16))!) { later = $0 }
            #expect(later.map { if case .failure(.connect(.cannotResolve)) = $0 { true } else { false } } == true)
            loop.run(until: { false }, timeoutSeconds: 0.3)
            #expect(downs.count == 2, "one report per link, no retries: \(downs)")
        }
    }

    @Test("a registration signed by another deployment's key stops the device with one permanent failure")
    func foreignRegistration() throws {
        let deployment = try TemporaryDeployment()
        let other = try TemporaryDeployment()
        let store = try InProcessStore(deployment)
        let gateway = try InProcessGateway(deployment)
        let loop = try EventLoop()
        defer { loop.shutdown() }
        var events: [DeviceEvent] = []
        let device = startDevice(loop: loop, gateway: .init(host: gateway.host, port: gateway.port),
                                 store: .init(host: store.host, port: store.port),
                                 registration: registration(other, "phone"), id: "phone") { events.append($0) }
        defer { device.stop() }
        #expect(loop.run(until: { events.contains { if case .stopped = $0 { true } else { false } } }))
        // Long enough for several reconnects at the backoff's floor, had the device kept trying.
        loop.run(until: { false }, timeoutSeconds: 0.5)
        let stops = events.compactMap { event -> PermanentFailure? in if case .stopped(let failure) = event { failure } else { nil } }
        #expect(stops.count == 1)
        #expect(stops.first?.service == "gateway")
        #expect(stops.first?.error.status == .badCredentials)
        #expect(!events.contains { if case .disconnected(from: "gateway", _) = $0 { true } else { false } },
                "a permanent failure is not reported as a retry: \(events)")
        #expect(events.last.map { if case .stopped = $0 { true } else { false } } == true, "nothing after the stop: \(events)")
    }

    @Test("a gateway draining says SHUTTING_DOWN and the device retries; another device with the same id replaces it for good")
    func goawayReasons() throws {
        let deployment = try TemporaryDeployment()
        let store = try InProcessStore(deployment)
        var gateway = try InProcessGateway(deployment)
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let storeEndpoint = ServerLink.Endpoint(host: store.host, port: store.port)
        var events: [DeviceEvent] = []
        let first = startDevice(loop: loop, gateway: .init(host: gateway.host, port: gateway.port), store: storeEndpoint,
                                registration: registration(deployment, "phone"), id: "phone") { events.append($0) }
        defer { first.stop() }
        #expect(loop.run(until: { events.contains(.gatewayConnected) }))

        let port = gateway.port
        gateway.stop()
        let shuttingDown = { (event: DeviceEvent) -> Bool in
            if case .disconnected(from: "gateway", .goaway(.shuttingDown, _)) = event { true } else { false }
        }
        #expect(loop.run(until: { events.contains(where: shuttingDown) }), "\(events)")
        #expect(ClientError.goaway(.shuttingDown, nil).description == "the server closed the connection: server shutting down")

        // Back on the same port: the device reconnects by itself.
        gateway = try InProcessGateway(deployment) { $0.port = port }
        let connections = { events.filter { $0 == .gatewayConnected }.count }
        #expect(loop.run(until: { connections() == 2 }, timeoutSeconds: 15))

        var secondEvents: [DeviceEvent] = []
        let second = startDevice(loop: loop, gateway: .init(host: gateway.host, port: gateway.port), store: storeEndpoint,
                                 registration: registration(deployment, "phone"), id: "phone") { secondEvents.append($0) }
        defer { second.stop() }
        #expect(loop.run(until: { events.contains { if case .stopped = $0 { true } else { false } } }), "\(events)")
        guard case .stopped(let failure)? = events.last else {
            Issue.record("the replaced device did not stop: \(events)")
            return
        }
        #expect(failure.error == .goaway(.replaced, failure.error.goawayText))
        #expect(failure.error.description.contains("replaced by another connection with the same device id"))
        #expect(secondEvents.contains(.gatewayConnected))
    }

    @Test("TLS on one side only, and a certificate that does not verify, are permanent failures named as such")
    func tlsMismatches() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("client-tls-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for name in ["server", "other"] {
            try SelfSignedCertificate.write(commonName: "localhost", subjectAltNames: ["DNS:localhost", "IP:127.0.0.1"],
                                            certificatePath: "\(directory)/\(name).pem", privateKeyPath: "\(directory)/\(name).key")
        }
        let deployment = try TemporaryDeployment()
        let serverTLS = try TLSContext.server(certificateFile: "\(directory)/server.pem", privateKeyFile: "\(directory)/server.key")
        let tlsStore = try InProcessStore(deployment) { $0.tls = serverTLS }
        let plainStore = try InProcessStore(deployment)
        let loop = try EventLoop()
        defer { loop.shutdown() }

        func firstFailure(_ endpoint: ServerLink.Endpoint) -> ClientError? {
            let link = ServerLink(loop: loop, endpoint: endpoint) { Hello(role: .device) }
            var failure: ClientError?
            link.onDown = { error in if failure == nil { failure = error } }
            link.start()
            loop.run(until: { failure != nil }, timeoutSeconds: 5)
            link.stop()
            return failure
        }
        let plainToTLS = firstFailure(.init(host: "127.0.0.1", port: tlsStore.port))
        #expect(plainToTLS == .serverSpeaksTLS)
        let rightCA = try TLSContext.client(caFile: "\(directory)/server.pem")
        let tlsToPlain = firstFailure(.init(host: "127.0.0.1", port: plainStore.port, tls: rightCA))
        #expect(tlsToPlain.map { if case .connect(.notTLS) = $0 { true } else { false } } == true, "\(String(describing: tlsToPlain))")
        let wrongCA = try TLSContext.client(caFile: "\(directory)/other.pem")
        let unverified = firstFailure(.init(host: "localhost", port: tlsStore.port, tls: wrongCA))
        guard case .connect(.tls(let message))? = unverified else {
            Issue.record("expected a TLS verification failure, got \(String(describing: unverified))")
            return
        }
        #expect(message.hasPrefix("certificate verify failed"), "\(message)")
        for failure in [plainToTLS, tlsToPlain, unverified] { #expect(failure?.isPermanent == true, "\(String(describing: failure))") }
        #expect(!ClientError.connect(.refused).isPermanent)
        #expect(!ClientError.goaway(.shuttingDown, nil).isPermanent)
        #expect(!ClientError.disconnected.isPermanent)
    }
}

extension ClientError {
    /// The text of a GOAWAY, for comparing the whole error.
    var goawayText: String? {
        if case .goaway(_, let text) = self { text } else { nil }
    }
}
