import PushClient
import PushClock
import PushEventLoop
import PushSecurity
import PushTestSupport
import PushWire

/// Secure sends in a steady stream on a fleet's loop (STORE, then PUSH of the id to one
/// device), through providers on several nodes in turn, as `send` in a loop does. Keeps
/// which pushes PUSH_ACK counted for their device: those must be shown.
final class DeviceTraffic {
    struct Acknowledged {
        var device: String
        var via: Int
        var ack: PushAck
        var atMs: Int64
    }

    private let fleet: DeviceFleet
    private let devices: [String]
    private let providers: [(node: Int, client: ProviderClient)]
    private var timer: LoopTimer?
    private(set) var sent = 0
    private(set) var finished = 0
    /// By payload text (unique per send).
    private(set) var acknowledged: [String: Acknowledged] = [:]
    /// Sends whose PUSH_ACK counted their one device more than once.
    private(set) var overcounted: [String] = []
    private(set) var failures: [String] = []
    /// Sends whose PUSH a node answered BUSY (SPEC.md 4.13-13: it could not reach the
    /// device through NATS): not acknowledged, and not a failure of the cluster's.
    private(set) var busy: [String] = []

    /// - Parameter via: the nodes whose providers take turns; device k of `devices` gets
    ///   send k mod their count.
    init(fleet: DeviceFleet, providerKey: SecretKey, devices: [String], via nodes: [Int]) {
        self.fleet = fleet
        self.devices = devices
        providers = nodes.map { node in
            (node, ProviderClient(loop: fleet.loop, store: fleet.storeEndpoint,
                                  gateway: ServerLink.Endpoint(host: fleet.gatewayAddresses[node].host, port: fleet.gatewayAddresses[node].port),
                                  providerKey: providerKey))
        }
    }

    deinit {
        timer?.cancel()
        for provider in providers { provider.client.stop() }
    }

    func start(everyMs: Int = 40) {
        timer = fleet.loop.schedule(after: .milliseconds(everyMs), repeating: true) { [weak self] in self?.sendOne() }
    }

    /// Stops sending; sends under way still finish.
    func stop() {
        timer?.cancel()
        timer = nil
    }

    private func sendOne() {
        let device = devices[sent % devices.count]
        let (node, provider) = providers[sent % providers.count]
        let text = "payload-\(sent)-for-\(device)-via-g\(node + 1)"
        sent += 1
        provider.send(ProviderClient.SecureMessage(recipient: "alice", payload: Array(text.utf8), target: .device(device))) { [weak self] result in
            guard let self else { return }
            self.finished += 1
            switch result {
            case .success(let receipt):
                let counted = receipt.delivery.written + receipt.delivery.queued
                if counted > 1 { self.overcounted.append("\(text): \(receipt.delivery)") }
                if counted >= 1 {
                    self.acknowledged[text] = Acknowledged(device: device, via: node, ack: receipt.delivery, atMs: Clocks.monotonicMilliseconds())
                }
            case .failure(.status(.busy, _)):
                self.busy.append(text)
            case .failure(let error):
                self.failures.append("\(text): \(error)")
            }
        }
    }

    /// Acknowledged pushes not shown on their device yet, by device.
    func unshown() -> [String: [String]] {
        var shownBy: [String: Set<String>] = [:]
        for device in devices { shownBy[device] = Set(fleet.texts(of: device)) }
        var missing: [String: [String]] = [:]
        for (text, sent) in acknowledged where shownBy[sent.device]?.contains(text) != true {
            missing[sent.device, default: []].append(text)
        }
        return missing
    }

    var everyAcknowledgedShown: Bool { unshown().isEmpty }

    /// Payloads a device showed more than once.
    func shownTwice() -> [String] {
        devices.flatMap { device in
            var counts: [String: Int] = [:]
            for text in fleet.texts(of: device) { counts[text, default: 0] += 1 }
            return counts.filter { $0.value > 1 }.map { "\(device): \($0.key) × \($0.value)" }
        }
    }
}

/// A condition that costs something (an HTTP request to every node) checked at most every
/// `everyMs` inside `EventLoop.run(until:)`, which polls every few milliseconds.
func throttled(everyMs: Int64 = 100, _ condition: @escaping () -> Bool) -> () -> Bool {
    var lastCheckMs: Int64 = 0
    var last = false
    return {
        let now = Clocks.monotonicMilliseconds()
        if now - lastCheckMs >= everyMs {
            lastCheckMs = now
            last = condition()
        }
        return last
    }
}
