import PushClock
import PushSession
import PushWire

/// `push`: `--devices` devices hold connections to the gateway; providers PUSH to one
/// device at a time (round-robin, target kind device) with ttl 0, i.e. connected devices
/// only. An operation ends when both the provider has PUSH_ACK and the device has the
/// PUSH; its latency runs from the provider's send to the device's receipt. Devices
/// answer each PUSH with DELIVERY_ACK, as real ones must.
enum PushBenchmark {
    static func run(_ session: BenchSession, _ shape: LoadShape) throws(BenchError) -> BenchReport {
        let gateways = session.target.gateways
        guard !gateways.isEmpty else { throw .setup("no gateway to benchmark") }
        let runner = Runner(shape: shape)
        let workload = PushWorkload(runner: runner)
        let devices = (0..<shape.devices).map {
            session.deviceGatewayLink(index: $0, device: "bench-push-\($0)", tags: [], owner: workload)
        }
        try session.connect(devices, to: gateways, phase: "connecting devices")
        let providers = (0..<shape.connections).map {
            session.providerLink(index: $0, capacity: shape.rate == nil ? shape.inflight : LoadShape.maxOutstanding, owner: workload, to: .gateway)
        }
        try session.connect(providers, to: gateways, phase: "connecting providers")
        workload.use(providers: providers, devices: devices)
        try session.measure(runner, workload)
        return runner.report(scenario: .push, parameters: session.gatewayParameters)
    }
}

final class PushWorkload: Workload, LinkOwner {
    /// Strong: the runner drops its workload in `finish()`, which breaks the cycle.
    private let runner: Runner
    private let ids = PushIDs()
    private var providers: [BenchLink] = []
    private var devices: [BenchLink] = []
    /// One PUSH per device (its target), sent on whichever provider link has room.
    private var templates: [FrameTemplate] = []
    private var rotation = LinkRotation()
    private var nextDevice = 0
    /// Per op slot: bit 0 waits for PUSH_ACK, bit 1 for the device's receipt. No dynamic
    /// exclusivity check (loop-confined): without it a push pays at least four checks on
    /// `pending` (248 instructions of the bench's 3.6k, 6.9 %) and three on `deliveredAt`
    /// (193, 5.3 %), measured as `BenchLink.session` is.
    @exclusivity(unchecked) private var pending: [UInt8]
    @exclusivity(unchecked) private var deliveredAt: [UInt64]

    private static let awaitingAck: UInt8 = 1
    private static let awaitingDelivery: UInt8 = 2

    init(runner: Runner) {
        self.runner = runner
        pending = Array(repeating: 0, count: runner.ops.capacity)
        deliveredAt = Array(repeating: 0, count: runner.ops.capacity)
    }

    func use(providers: [BenchLink], devices: [BenchLink]) {
        self.providers = providers
        self.devices = devices
        templates = devices.map { FrameTemplate(.push(Push(target: .device($0.device), id: Array(repeating: 0, count: 16), ttlSeconds: 0))) }
    }

    func issue(token: UInt32, slot: Int) -> Bool {
        guard let index = rotation.pick(providers), let connection = providers[index].connection else { return false }
        let device = nextDevice
        nextDevice = nextDevice + 1 == devices.count ? 0 : nextDevice + 1
        pending[slot] = PushWorkload.awaitingAck | PushWorkload.awaitingDelivery
        templates[device].send(on: connection, correlation: token, id: ids.id(for: token))
        providers[index].outstanding += 1
        return true
    }

    func frame(on link: BenchLink, header: FrameHeader, body: UnsafeRawBufferPointer) {
        if link.isDevice {
            deviceFrame(link, header: header, body: body)
            return
        }
        link.outstanding -= 1
        guard let slot = runner.ops.slot(of: header.correlation) else { return }
        switch header.rawType {
        case MessageType.pushAck.rawValue:
            // Queued counts too: every bench device stays connected, so a push held behind
            // its delivery window still reaches it once the window has room.
            guard let written = FieldScan.uint32(of: FieldTag.written.rawValue, in: body),
                  let queued = FieldScan.uint32(of: FieldTag.queued.rawValue, in: body), written + queued > 0 else {
                runner.fail(slot: slot, reason: "NOT_WRITTEN")
                return
            }
            settle(slot, clearing: PushWorkload.awaitingAck)
        case MessageType.error.rawValue:
            runner.fail(slot: slot, reason: header.status.name)
        default:
            runner.fail(slot: slot, reason: "unexpected \(header.type?.specName ?? "frame")")
        }
    }

    private func deviceFrame(_ link: BenchLink, header: FrameHeader, body: UnsafeRawBufferPointer) {
        switch header.rawType {
        case MessageType.push.rawValue:
            guard let id = link.acknowledgePush(header: header, body: body) else { return runner.count("MALFORMED_PUSH") }
            guard let token = ids.token(in: id), let slot = runner.ops.slot(of: token),
                  pending[slot] & PushWorkload.awaitingDelivery != 0 else { return }
            deliveredAt[slot] = Clocks.monotonicNanoseconds()
            settle(slot, clearing: PushWorkload.awaitingDelivery)
        case MessageType.missed.rawValue:
            runner.count("MISSED")
        default:
            runner.count("unexpected \(header.type?.specName ?? "frame") on a device")
        }
    }

    private func settle(_ slot: Int, clearing bit: UInt8) {
        pending[slot] &= ~bit
        if pending[slot] == 0 { runner.complete(slot: slot, end: deliveredAt[slot]) }
    }

    func linkLost(_ link: BenchLink) {
        runner.abort(reason: "\(link.isDevice ? "device" : "provider") connection lost: \(link.failure ?? "closed")")
    }
}
