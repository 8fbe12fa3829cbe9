import Histogram
import PushClock
import PushSession
import PushWire

/// `fanout`: `--devices` devices registered with one tag (fresh per run); a provider
/// PUSHes to the tag (ttl 0: connected devices only). An operation ends when the
/// provider has PUSH_ACK and every device has the PUSH; its latency is the time until
/// the last device has it. With the default `--inflight 1` one fan-out runs at a time.
enum FanoutBenchmark {
    static func run(_ session: BenchSession, _ shape: LoadShape) throws(BenchError) -> BenchReport {
        let gateways = session.target.gateways
        guard !gateways.isEmpty else { throw .setup("no gateway to benchmark") }
        let tag = "bench-fanout-" + String(PayloadID.random().low, radix: 16)
        let runner = Runner(shape: shape)
        runner.deliveriesPerOperation = shape.devices
        let workload = FanoutWorkload(runner: runner, deviceCount: shape.devices)
        let devices = (0..<shape.devices).map {
            session.deviceGatewayLink(index: $0, device: "bench-fanout-\($0)", tags: [tag], owner: workload)
        }
        try session.connect(devices, to: gateways, phase: "connecting devices")
        let providers = (0..<shape.connections).map {
            session.providerLink(index: $0, capacity: shape.rate == nil ? shape.inflight : LoadShape.maxOutstanding, owner: workload, to: .gateway)
        }
        try session.connect(providers, to: gateways, phase: "connecting providers")
        workload.use(providers: providers, template: FrameTemplate(.push(Push(target: .tag(tag), id: Array(repeating: 0, count: 16),
                                                                                ttlSeconds: 0))))
        try session.measure(runner, workload)
        var report = runner.report(scenario: .fanout, parameters: session.gatewayParameters)
        let deliveries = Double(runner.completedMeasured) * Double(shape.devices)
        report.extra.append(("deliveries_per_s", report.seconds > 0 ? deliveries / report.seconds : 0))
        if workload.firstDelivery.totalCount > 0 {
            report.extra.append(("first_device_p50_us", Double(workload.firstDelivery.valueAtPercentile(50))))
        }
        return report
    }
}

final class FanoutWorkload: Workload, LinkOwner {
    /// Strong: the runner drops its workload in `finish()`, which breaks the cycle, and
    /// a strong `let` costs nothing per frame where `unowned` checks the object each time.
    private let runner: Runner
    private let deviceCount: Int
    private let ids = PushIDs()
    private var providers: [BenchLink] = []
    private var templates: [FrameTemplate] = []
    private var rotation = LinkRotation()
    /// Per op slot, in one buffer allocated up front: read and written for every delivery
    /// without copy-on-write checks or exclusivity bookkeeping.
    private let slots: UnsafeMutableBufferPointer<FanoutSlot>
    /// Time until the first device has the push, for measured fan-outs.
    private(set) var firstDelivery = makeLatencyHistogram()

    init(runner: Runner, deviceCount: Int) {
        self.runner = runner
        self.deviceCount = deviceCount
        slots = .allocate(capacity: runner.ops.capacity)
        slots.initialize(repeating: FanoutSlot())
    }

    deinit { slots.deallocate() }

    func use(providers: [BenchLink], template: FrameTemplate) {
        self.providers = providers
        templates = Array(repeating: template, count: providers.count)
    }

    func issue(token: UInt32, slot: Int) -> Bool {
        guard let index = rotation.pick(providers), let connection = providers[index].connection else { return false }
        slots[slot] = FanoutSlot(remaining: deviceCount, awaitingAck: true)
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
                slots[slot].remaining -= deviceCount - written
            }
            slots[slot].awaitingAck = false
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
            guard let token = ids.token(in: id), let slot = runner.ops.slot(of: token) else { return }
            if slots[slot].delivered() { settle(slot) }
        case MessageType.missed.rawValue:
            runner.count("MISSED")
        default:
            runner.count("unexpected \(header.type?.specName ?? "frame") on a device")
        }
    }

    private func settle(_ slot: Int) {
        guard slots[slot].isComplete else { return }
        if runner.isMeasured(slot: slot), slots[slot].firstAt > 0 {
            let micros = (slots[slot].firstAt &- runner.startTime(slot: slot)) / 1_000
            _ = firstDelivery.record(min(max(micros, 1), firstDelivery.highestTrackableValue))
        }
        let end = slots[slot].lastAt == 0 ? Clocks.monotonicNanoseconds() : slots[slot].lastAt
        slots[slot] = FanoutSlot()
        runner.complete(slot: slot, end: end)
    }

    func linkLost(_ link: BenchLink) {
        runner.abort(reason: "\(link.isDevice ? "device" : "provider") connection lost: \(link.failure ?? "closed")")
    }
}

/// One fan-out in flight: devices still to receive it, PUSH_ACK still due, first and last
/// receipt (monotonic nanoseconds, 0 for none yet).
struct FanoutSlot {
    var remaining = 0
    var awaitingAck = false
    var firstAt: UInt64 = 0
    var lastAt: UInt64 = 0

    var isComplete: Bool { remaining <= 0 && !awaitingAck }

    /// A device has the push; true when that may have completed the fan-out.
    ///
    /// The clock is read only for the receipts whose time can end up in the report: the
    /// first, the one that brings `remaining` to 0, and those that arrive while the
    /// PUSH_ACK is still due (a PUSH_ACK that reports devices not written to lowers
    /// `remaining` and can make the latest receipt so far the last one). After the
    /// PUSH_ACK, the receipts in between are only counted.
    @inline(__always)
    mutating func delivered(now: () -> UInt64 = Clocks.monotonicNanoseconds) -> Bool {
        guard remaining > 0 else { return false }
        remaining -= 1
        if firstAt == 0 || remaining == 0 || awaitingAck {
            let time = now()
            if firstAt == 0 { firstAt = time }
            lastAt = time
        }
        return remaining == 0
    }
}
