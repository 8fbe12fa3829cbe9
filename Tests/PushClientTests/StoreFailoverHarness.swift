import Foundation
import PushClient
import PushEventLoop
import PushSecurity
import PushSession
import PushTestSupport
import PushWire

/// A device and a provider on one loop of the test's thread, each given a list of store
/// addresses, with what they reported: the failover tests watch them move between stores.
final class FailoverClients {
    let loop: EventLoop
    let deployment: TemporaryDeployment
    let device: DeviceClient
    let provider: ProviderClient
    private(set) var events: [DeviceEvent] = []
    private(set) var shown: [DeviceNotification] = []
    private(set) var providerErrors: [(service: String, error: ClientError)] = []

    /// - Parameter tokens: where the device's fetch token is (a saved LOGIN), or nil for none.
    convenience init(_ deployment: TemporaryDeployment, stores: [Int], gateway: Int, device deviceID: String = "phone",
                     tokens: TokenStore? = nil) throws {
        try self.init(deployment, stores: stores, gateways: [gateway], device: deviceID, tokens: tokens)
    }

    /// Both clients take the gateways on 127.0.0.1 at `gateways`, in that order.
    init(_ deployment: TemporaryDeployment, stores: [Int], gateways: [Int], device deviceID: String = "phone",
         tokens: TokenStore? = nil) throws {
        self.deployment = deployment
        loop = try EventLoop()
        let storeList = FailoverClients.endpoint(stores)
        let gatewayEndpoint = FailoverClients.endpoint(gateways)
        device = DeviceClient(loop: loop, gateway: gatewayEndpoint, store: storeList,
                              registration: try deployment.enrolledRegistration(deviceID), deviceID: deviceID, tokenStore: tokens)
        provider = ProviderClient(loop: loop, store: storeList, gateway: gatewayEndpoint, providerKey: deployment.deployment.providerKey)
        device.onEvent = { [unowned self] in events.append($0) }
        device.onNotification = { [unowned self] in shown.append($0) }
        provider.onConnectionError = { [unowned self] in providerErrors.append(($0, $1)) }
        device.start()
    }

    deinit {
        device.stop()
        provider.stop()
        loop.shutdown()
    }

    /// The services on 127.0.0.1 at `ports`, in that order.
    static func endpoint(_ ports: [Int]) -> ServerLink.Endpoint {
        let addresses = ports.map { HostPort(host: "127.0.0.1", port: $0) }
        return ServerLink.Endpoint(AddressList(addresses) ?? AddressList(HostPort(host: "127.0.0.1", port: 1)))
    }

    var storeConnects: Int { events.filter { $0 == .storeConnected }.count }
    var gatewayConnects: Int { events.filter { $0 == .gatewayConnected }.count }

    /// The device's failed gateway attempts so far.
    var gatewayFailures: [ClientError] {
        events.compactMap { if case .disconnected(from: "gateway", let error) = $0 { error } else { nil } }
    }

    /// The device's failed store attempts so far.
    var storeFailures: [ClientError] {
        events.compactMap { if case .disconnected(from: "store", let error) = $0 { error } else { nil } }
    }

    func run(until condition: @escaping () -> Bool, timeoutSeconds: Double = 10) -> Bool {
        loop.run(until: condition, timeoutSeconds: timeoutSeconds)
    }

    /// Runs the loop for `seconds` whatever happens.
    func idle(_ seconds: Double) { _ = loop.run(until: { false }, timeoutSeconds: seconds) }

    func login(password: String = "alice-pw") throws {
        var result: Result<UInt64, ClientError>?
        device.login(user: "alice", password: Array(password.utf8)) { result = $0 }
        guard run(until: { result != nil }) else { throw ServiceError.failed("LOGIN did not finish") }
        _ = try result?.get()
    }

    func send(_ text: String) -> Result<SendReceipt, ClientError>? {
        var result: Result<SendReceipt, ClientError>?
        provider.send(ProviderClient.SecureMessage(recipient: "alice", payload: Array(text.utf8))) { result = $0 }
        _ = run(until: { result != nil }, timeoutSeconds: 15)
        return result
    }

    /// STATUS of an ID no store knows: NOT_FOUND from whichever store the provider is on,
    /// once it is on one.
    func providerReachesAStore() -> Bool {
        var result: Result<StatusOK, ClientError>?
        provider.status(PayloadID(bytes: Array(repeating: 7, count: 16))!) { result = $0 }
        _ = run(until: { result != nil })
        if case .failure(.status(.notFound, _))? = result { return true }
        return false
    }

    var texts: [String] { shown.map(\.text) }
}

/// One-shot blocking exchanges with a store, beside the clients under test.
enum StoreProbe {
    /// LOGIN as `device` of alice: the token and its expiry.
    static func login(port: Int, device: String = "phone", password: String = "alice-pw") throws -> TokenStore.Saved {
        let client = try BlockingWireClient(host: "127.0.0.1", port: port)
        guard case .helloOK = try client.hello(Hello(role: .device)) else { throw ServiceError.failed("device HELLO refused") }
        guard case .loginOK(let ok) = try client.request(.login(Login(user: "alice", password: Array(password.utf8), deviceID: device)))
        else { throw ServiceError.failed("LOGIN refused") }
        return TokenStore.Saved(token: ok.token, expiresAt: ok.expiresAt)
    }

    /// STORE for alice as the provider: the new ID.
    static func store(port: Int, _ deployment: TemporaryDeployment, text: String) throws -> PayloadID {
        let client = try BlockingWireClient(host: "127.0.0.1", port: port)
        let hello = Hello(role: .provider, credential: deployment.providerCredential(for: .store))
        guard case .helloOK = try client.hello(hello) else { throw ServiceError.failed("provider HELLO refused") }
        guard case .storeOK(let ok) = try client.request(.store(StoreRequest(user: "alice", payload: Array(text.utf8))))
        else { throw ServiceError.failed("STORE refused") }
        return ok.id
    }

    /// The IDs SYNC lists for the token's device: those it has not acknowledged.
    static func unacknowledged(port: Int, token: [UInt8]) throws -> [PayloadID] {
        let client = try BlockingWireClient(host: "127.0.0.1", port: port)
        guard case .helloOK = try client.hello(Hello(role: .device)) else { throw ServiceError.failed("device HELLO refused") }
        guard case .syncOK(let page) = try client.request(.sync(Sync(token: token, cursor: 0, limit: 100)))
        else { throw ServiceError.failed("SYNC refused") }
        return page.ids
    }

    /// STOREs an in-process store has answered with STORE_OK, from its metrics.
    static func storesAnswered(_ store: InProcessStore) -> Int? {
        let text = store.onLoop { $0.metrics.text } ?? ""
        let line = text.split(separator: "\n").first { $0.hasPrefix("securepush_store_requests_total{") && $0.contains("type=\"store\"")
            && $0.contains("status=\"ok\"") }
        return line.flatMap { $0.split(separator: " ").last }.flatMap { Double($0) }.map { Int($0) }
    }
}

/// A copy of a deployment directory (keys, config, store database) that the test removes:
/// a second store with the same keys and users and its own database.
final class CopiedDeployment {
    let directory: String

    init(of deployment: TemporaryDeployment) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("securepush-copy-\(UUID().uuidString)").path
        try FileManager.default.copyItem(atPath: deployment.directory, toPath: directory)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }
}
