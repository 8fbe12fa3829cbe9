import Foundation
import PushClient
import PushEventLoop
import PushTestSupport
import PushWire

/// In-process `DeviceClient`s of a cluster harness on one loop of the test's thread, each
/// given every node's address and the store's, with what they showed and reported.
/// Device k starts on node k mod N: its address list begins there and wraps around, so
/// when that node dies the device moves to the next one.
final class DeviceFleet {
    let loop: EventLoop
    let storeEndpoint: ServerLink.Endpoint
    let gatewayAddresses: [HostPort]
    private let devices: [ClusterDevice]
    private var clients: [String: DeviceClient] = [:]
    private var shown: [String: [String]] = [:]
    private var connectCounts: [String: Int] = [:]
    private(set) var stoppedDevices: [String] = []

    convenience init(_ cluster: GatewayClusterHarness, devices: [ClusterDevice]) throws {
        try self.init(store: ServerLink.Endpoint(host: "127.0.0.1", port: cluster.store.port),
                      gateways: try cluster.names.indices.map { HostPort(host: "127.0.0.1", port: try cluster.node($0).port) },
                      devices: devices, registration: cluster.registration)
    }

    /// - Parameter homes: the node each device starts on (default: device k on node k mod N);
    ///   a device given one node only (`onlyHome`) never moves.
    init(store: ServerLink.Endpoint, gateways: [HostPort], devices: [ClusterDevice], homes: [Int]? = nil, onlyHome: Bool = false,
         registration: (String) throws -> [UInt8]) throws {
        loop = try EventLoop()
        self.devices = devices
        storeEndpoint = store
        gatewayAddresses = gateways
        for (position, device) in devices.enumerated() {
            let home = homes.map { $0[position % $0.count] } ?? position % gatewayAddresses.count
            let gateway = onlyHome ? ServerLink.Endpoint(host: gateways[home].host, port: gateways[home].port) : gatewayEndpoint(first: home)
            let client = DeviceClient(loop: loop, gateway: gateway, store: storeEndpoint,
                                      registration: try registration(device.id), deviceID: device.id, tokenStore: nil)
            let id = device.id
            client.onNotification = { [unowned self] in self.shown[id, default: []].append($0.text) }
            client.onEvent = { [unowned self] event in
                switch event {
                case .gatewayConnected: self.connectCounts[id, default: 0] += 1
                case .stopped(let failure): self.stoppedDevices.append("\(id): \(failure)")
                default: break
                }
            }
            clients[id] = client
            client.start()
        }
    }

    deinit {
        for client in clients.values { client.stop() }
        loop.shutdown()
    }

    /// Every node's address, starting at node `first`.
    func gatewayEndpoint(first: Int) -> ServerLink.Endpoint {
        let rotated = Array(gatewayAddresses[first...] + gatewayAddresses[..<first])
        return ServerLink.Endpoint(AddressList(rotated) ?? AddressList(gatewayAddresses[0]))
    }

    func run(until condition: @escaping () -> Bool, timeoutSeconds: Double = 15) -> Bool {
        loop.run(until: condition, timeoutSeconds: timeoutSeconds)
    }

    /// LOGIN for every device as its user, so that it fetches and shows payloads.
    func loginAll() throws {
        var results: [String: Result<UInt64, ClientError>] = [:]
        for device in devices {
            clients[device.id]?.login(user: device.user, password: Array(GatewayClusterHarness.password(of: device.user).utf8)) {
                results[device.id] = $0
            }
        }
        guard run(until: { results.count == self.devices.count }) else { throw ServiceError.failed("LOGIN did not finish") }
        for (id, result) in results {
            if case .failure(let error) = result { throw ServiceError.failed("LOGIN of \(id): \(error)") }
        }
    }

    /// Devices that reached a gateway at least once.
    var connectedDevices: Int { connectCounts.values.filter { $0 > 0 }.count }

    func texts(of device: String) -> [String] { shown[device] ?? [] }
    func connects(of device: String) -> Int { connectCounts[device] ?? 0 }
    func gatewayAddress(of device: String) -> HostPort? { clients[device]?.gatewayAddress }
}
