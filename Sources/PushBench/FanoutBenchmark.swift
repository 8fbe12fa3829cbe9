import Histogram
import PushWire
import PushSession

/// `fanout`: `--devices` devices registered with one tag (fresh per run); a provider
/// PUSHes to the tag (ttl 0: connected devices only). An operation ends when the
/// provider has PUSH_ACK and every device has the PUSH; its latency is the time until
/// the last device has it. With the default `--inflight 1` one fan-out runs at a time.
enum FanoutBenchmark {
    static func run(_ session: BenchSession, _ shape: LoadShape) throws(BenchError) -> BenchReport {
        guard let gateway = session.target.gateway else { throw .setup("no gateway to benchmark") }
        let tag = "bench-fanout-" + String(PayloadID.random().low, radix: 16)
        let runner = Runner(shape: shape)
        let workload = FanoutWorkload(runner: runner, deviceCount: shape.devices)
        let devices = (0..<shape.devices).map {
            session.deviceGatewayLink(index: $0, device: "bench-fanout-\($0)", tags: [tag], owner: workload)
        }
        try session.connect(devices, to: gateway, phase: "connecting devices")
        let providers = (0..<shape.connections).map {
            session.providerLink(index: $0, capacity: shape.rate == nil ? shape.inflight : LoadShape.maxOutstanding, owner: workload, to: .gateway)
        }
        try session.connect(providers, to: gateway, phase: "connecting providers")
        workload.use(providers: providers, template: FrameTemplate(.push(Push(target: .tag(tag), id: Array(repeating: 0, count: 16),
                                                                                ttlSeconds: 0))))
        try session.measure(runner, workload)
        var report = runner.report(scenario: .fanout, parameters: [("gateway", .text(gateway.description))])
        let deliveries = Double(runner.completedMeasured) * Double(shape.devices)
        report.extra.append(("deliveries_per_s", report.seconds > 0 ? deliveries / report.seconds : 0))
        if workload.firstDelivery.totalCount > 0 {
            report.extra.append(("first_device_p50_us", Double(workload.firstDelivery.valueAtPercentile(50))))
        }
        return report
    }
}

final class FanoutWorkload: Workload, LinkOwner {
    private unowned let runner: Runner
    private let deviceCount: Int
    private let ids = PushIDs()
    private var providers: [BenchLink] = []
    private var templates: [FrameTemplate] = []
    private var rotation = LinkRotation()
    /// Per op slot: devices still to receive it, PUSH_ACK still due, first and last receipt.
    private var remaining: [Int]
    private var awaitingAck: [Bool]
    private var firstAt: [UInt64]
    private var lastAt: [UInt64]
    /// Time until the first device has the push, for measured fan-outs.
    private(set) var firstDelivery = makeLatencyHistogram()

    init(runner: Runner, deviceCount: Int) {
        self.runner = runner
        self.deviceCount = deviceCount
        let capacity = runner.ops.capacity
        remaining = Array(repeating: 0, count: capacity)
        awaitingAck = Array(repeating: false, count: capacity)
        firstAt = Array(repeating: 0, count: capacity)
        lastAt = Array(repeating: 0, count: capacity)
    }

    func use(providers: [BenchLink], template: FrameTemplate) {
        self.providers = providers
        templates = Array(repeating: template, count: providers.count)
    }

    func issue(token: UInt32, slot: Int) -> Bool {
        guard let index = rotation.pick(providers), let connection = providers[index].connection else { return false }
        remaining[slot] = deviceCount
        awaitingAck[slot] = true
        firstAt[slot] = 0
        templates[index].send(on: connection, correlation: token, id: ids.id(for: token))
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
            let written = Int(FieldScan.uint32(of: FieldTag.written.rawValue, in: body) ?? 0)
                + Int(FieldScan.uint32(of: FieldTag.queued.rawValue, in: body) ?? 0)
            if written < deviceCount {
                // Devices the gateway did not write to will never report; stop waiting for them.
                runner.count("NOT_WRITTEN", by: UInt64(deviceCount - written))
                remaining[slot] -= deviceCount - written
            }
            awaitingAck[slot] = false
            settle(slot)
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
            guard let token = ids.token(in: id), let slot = runner.ops.slot(of: token), remaining[slot] > 0 else { return }
            let now = Clocks.monotonicNanoseconds()
            if firstAt[slot] == 0 { firstAt[slot] = now }
            lastAt[slot] = now
            remaining[slot] -= 1
            settle(slot)
        case MessageType.missed.rawValue:
            runner.count("MISSED")
        default:
            break
        }
    }

    private func settle(_ slot: Int) {
        guard remaining[slot] <= 0, !awaitingAck[slot] else { return }
        if runner.isMeasured(slot: slot), firstAt[slot] > 0 {
            let micros = (firstAt[slot] &- runner.startTime(slot: slot)) / 1_000
            _ = firstDelivery.record(min(max(micros, 1), firstDelivery.highestTrackableValue))
        }
        if lastAt[slot] == 0 { lastAt[slot] = Clocks.monotonicNanoseconds() }
        runner.complete(slot: slot, end: lastAt[slot])
        lastAt[slot] = 0
    }

    func linkLost(_ link: BenchLink) {
        runner.abort(reason: "\(link.isDevice ? "device" : "provider") connection lost: \(link.failure ?? "closed")")
    }
}
