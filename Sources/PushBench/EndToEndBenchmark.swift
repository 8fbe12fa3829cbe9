import PushClock
import PushSession
import PushWire

/// `e2e`: the whole secure push. Each of `--devices` devices holds a connection to the
/// gateway (its registration) and one to the store (its fetch token, from one LOGIN at
/// setup). An operation is: a provider STOREs a payload for the bench user; on STORE_OK
/// a provider PUSHes the id to one device (round-robin); the device answers DELIVERY_ACK,
/// FETCHes the id from the store and, with the payload in hand, ACKs it. Latency runs
/// from the STORE (its intended start, open loop) to FETCH_OK; the operation ends, and
/// its provider's slot is free again, once PUSH_ACK is in as well. The device's ACK (its
/// read receipt) goes on as a follow-up: a provider does not wait for a device's receipt,
/// as the Redis pattern's sender does not wait for the device's DEL. The run still waits
/// for every ACK_OK, counts any refusal as an error, and a measured one arriving last
/// ends the measured window.
///
/// By SEND (`--send`), the operation's first step is one SEND to the store, which commits
/// the payload with its push and hands the push to its gateway itself (the store must run
/// with `--gateway`); latency runs from the SEND to FETCH_OK, and the operation ends once
/// SEND_OK is in as well. The device may have the PUSH before the provider has SEND_OK.
///
/// Sealed (`--sealed`), the provider seals each payload to the device's key before its
/// STORE or SEND and the device opens what it fetched (`EndToEndSealing`).
enum EndToEndBenchmark {
    /// Long enough to deliver to a device that reconnects; the devices here never do.
    static let pushTTLSeconds: UInt32 = 60

    /// - Parameter bySend: one SEND per operation instead of STORE then PUSH.
    /// - Parameter sealedSuite: seal every payload to the device's key of this suite.
    static func run(_ session: BenchSession, _ shape: LoadShape, bySend: Bool = false,
                    sealedSuite: KeySuite? = nil) throws(BenchError) -> BenchReport {
        let gateways = session.target.gateways
        guard session.target.store != nil, !gateways.isEmpty else {
            throw .setup("e2e needs a store and a gateway")
        }
        let runner = Runner(shape: shape)
        let names = (0..<shape.devices).map { "bench-e2e-\($0)" }
        let payload = StoreBenchmark.payload(size: shape.payloadSize)
        let sealing = try sealedSuite.map { suite throws(BenchError) in
            try EndToEndSealing(suite: suite, user: session.target.user, payload: payload, devices: names)
        }
        let workload = EndToEndWorkload(runner: runner, payloadSize: shape.payloadSize, sealing: sealing, bySend: bySend)

        // Devices: enrolled in the registry, then the store side (LOGIN once each), then
        // the gateway side with the enrolled registrations.
        try session.target.enrollDevices(names)
        let login = LoginCollector(count: shape.devices)
        let deviceStores = names.enumerated().map { index, name in
            session.deviceStoreLink(index: index, device: name, capacity: LoadShape.maxOutstanding, owner: login)
        }
        try session.connect(deviceStores, to: session.target.stores, phase: "connecting devices to the store")
        try login.run(deviceStores, user: session.target.user, password: session.target.password, session: session,
                      keys: sealing.map { sealing in (0..<names.count).map { (sealing.publicKey(device: $0), sealing.keyID(device: $0)) } })
        for link in deviceStores { link.owner = workload }
        let deviceGateways = names.enumerated().map { index, name in
            session.deviceGatewayLink(index: index, device: name, tags: [], owner: workload)
        }
        try session.connect(deviceGateways, to: gateways, phase: "connecting devices to the gateway")

        let capacity = shape.rate == nil ? shape.inflight : LoadShape.maxOutstanding
        let storeProviders = (0..<shape.connections).map { session.providerLink(index: $0, capacity: capacity, owner: workload, to: .store) }
        try session.connect(storeProviders, to: session.target.stores, phase: "connecting providers to the store")
        var pushProviders: [BenchLink] = []
        if !bySend {
            pushProviders = (0..<shape.connections).map { session.providerLink(index: $0, capacity: capacity, owner: workload, to: .gateway) }
            try session.connect(pushProviders, to: gateways, phase: "connecting providers to the gateway")
        }

        workload.use(storeProviders: storeProviders, pushProviders: pushProviders, deviceGateways: deviceGateways,
                     deviceStores: deviceStores, tokens: login.tokens,
                     store: StoreBenchmark.template(user: session.target.user, payloadSize: shape.payloadSize),
                     sends: bySend ? names.map { name in
                         FrameTemplate(.send(SendRequest(user: session.target.user, payload: payload, ttlSeconds: StoreBenchmark.ttlSeconds,
                                                         target: .device(name), pushTTLSeconds: pushTTLSeconds)))
                     } : nil)
        try session.measure(runner, workload)
        if let sealing { runner.extras += sealing.extras }
        return runner.report(scenario: .e2e, parameters: [("store", .text(session.target.storesText)),
                                                          ("request", .text(bySend ? "send" : "store+push")),
                                                          ("sealed", .text(sealing.map { "\($0.suite)" } ?? "no"))] + session.gatewayParameters)
    }
}

/// The operation's path through the two services, one step per reply.
final class EndToEndWorkload: Workload, LinkOwner {
    private unowned let runner: Runner
    private let payloadSize: Int
    private var storeProviders: [BenchLink] = []
    private var pushProviders: [BenchLink] = []
    private var deviceGateways: [BenchLink] = []
    private var deviceStores: [BenchLink] = []
    private var storeTemplates: [FrameTemplate] = []
    /// By device, when operations start with SEND.
    private var sendTemplates: [FrameTemplate]?
    /// PUSHes that reached their device before SEND_OK reached the provider: id -> device.
    private var earlyPushes: [PayloadID: Int] = [:]
    private var pushTemplates: [FrameTemplate] = []
    private var fetchTemplates: [FrameTemplate] = []
    private var ackTemplates: [FrameTemplate] = []
    private var storeRotation = LinkRotation()
    private var pushRotation = LinkRotation()
    private var nextDevice = 0
    /// Store id -> operation token, from STORE_OK until the device has the PUSH.
    private var byStoreID: [PayloadID: UInt32] = [:]
    /// Read receipts sent and not answered: their correlation (the operation's token,
    /// whose slot may already serve another operation under a newer generation) ->
    /// whether the operation was measured.
    private var receipts: [UInt32: Bool] = [:]
    // Per op slot.
    private var device: [Int]
    private var storeID: [PayloadID]
    private var pending: [UInt8]
    private var fetchedAt: [UInt64]

    private static let awaitingPushAck: UInt8 = 1
    private static let awaitingFetchOK: UInt8 = 2

    private let sealing: EndToEndSealing?
    private let bySend: Bool

    init(runner: Runner, payloadSize: Int, sealing: EndToEndSealing? = nil, bySend: Bool = false) {
        self.runner = runner
        self.payloadSize = payloadSize
        self.sealing = sealing
        self.bySend = bySend
        let capacity = runner.ops.capacity
        device = Array(repeating: 0, count: capacity)
        storeID = Array(repeating: PayloadID(high: 0, low: 0), count: capacity)
        pending = Array(repeating: 0, count: capacity)
        fetchedAt = Array(repeating: 0, count: capacity)
        byStoreID.reserveCapacity(capacity)
        receipts.reserveCapacity(capacity)
    }

    func use(storeProviders: [BenchLink], pushProviders: [BenchLink], deviceGateways: [BenchLink], deviceStores: [BenchLink],
             tokens: [[UInt8]], store: FrameTemplate, sends: [FrameTemplate]? = nil) {
        sendTemplates = sends
        self.storeProviders = storeProviders
        self.pushProviders = pushProviders
        self.deviceGateways = deviceGateways
        self.deviceStores = deviceStores
        storeTemplates = Array(repeating: store, count: storeProviders.count)
        let zero = PayloadID(high: 0, low: 0)
        pushTemplates = deviceGateways.map {
            FrameTemplate(.push(Push(target: .device($0.device), id: zero.bytes, ttlSeconds: EndToEndBenchmark.pushTTLSeconds)))
        }
        fetchTemplates = tokens.map { FrameTemplate(.fetch(Fetch(id: zero, token: $0))) }
        ackTemplates = tokens.map { FrameTemplate(.ack(Ack(id: zero, token: $0))) }
    }

    func issue(token: UInt32, slot: Int) -> Bool {
        guard let index = storeRotation.pick(storeProviders), let connection = storeProviders[index].connection else { return false }
        device[slot] = nextDevice
        nextDevice = nextDevice + 1 == deviceGateways.count ? 0 : nextDevice + 1
        pending[slot] = EndToEndWorkload.awaitingPushAck | EndToEndWorkload.awaitingFetchOK
        if let sealing {
            guard let frame = sealing.request(device: device[slot], bySend: bySend, correlation: token) else {
                fail(slot, "SEAL_FAILED")
                return true
            }
            connection.write(frame)
        } else if sendTemplates != nil {
            // SEND_OK clears the bit PUSH_ACK clears on the two-request path.
            sendTemplates?[device[slot]].send(on: connection, correlation: token)
        } else {
            storeTemplates[index].send(on: connection, correlation: token)
        }
        storeProviders[index].outstanding += 1
        return true
    }

    func frame(on link: BenchLink, header: FrameHeader, body: UnsafeRawBufferPointer) {
        switch header.rawType {
        case MessageType.push.rawValue: pushed(link, header: header, body: body)
        case MessageType.storeOK.rawValue: stored(link, header: header, body: body)
        case MessageType.sendOK.rawValue: sent(link, header: header, body: body)
        case MessageType.pushAck.rawValue: pushAcknowledged(link, header: header, body: body)
        case MessageType.fetchOK.rawValue: fetched(link, header: header, body: body)
        case MessageType.ackOK.rawValue: receiptAnswered(link, header: header, failure: nil)
        case MessageType.missed.rawValue: runner.count("MISSED")
        case MessageType.error.rawValue:
            if link.isDevice, receipts[header.correlation] != nil {
                return receiptAnswered(link, header: header, failure: "ACK \(header.status.name)")
            }
            link.outstanding -= 1
            if let slot = runner.ops.slot(of: header.correlation) { fail(slot, header.status.name) }
        default:
            runner.count("unexpected \(header.type?.specName ?? "frame")")
        }
    }

    /// STORE_OK: the payload is durable; push its id to the op's device.
    private func stored(_ link: BenchLink, header: FrameHeader, body: UnsafeRawBufferPointer) {
        link.outstanding -= 1
        guard let slot = runner.ops.slot(of: header.correlation) else { return }
        guard let id = FieldScan.payloadID(in: body) else { return fail(slot, "MALFORMED_STORE_OK") }
        storeID[slot] = id
        guard let index = pushRotation.pick(pushProviders), let connection = pushProviders[index].connection else {
            return fail(slot, "NO_PUSH_CONNECTION_ROOM")
        }
        byStoreID[id] = header.correlation
        pushTemplates[device[slot]].send(on: connection, correlation: header.correlation, id: id)
        pushProviders[index].outstanding += 1
    }

    /// SEND_OK: payload and push are durable; the store pushes. A PUSH already at the device
    /// goes on to its FETCH now.
    private func sent(_ link: BenchLink, header: FrameHeader, body: UnsafeRawBufferPointer) {
        link.outstanding -= 1
        guard let slot = runner.ops.slot(of: header.correlation) else { return }
        guard let id = FieldScan.payloadID(in: body) else { return fail(slot, "MALFORMED_SEND_OK") }
        storeID[slot] = id
        if let deviceIndex = earlyPushes.removeValue(forKey: id) {
            fetch(id, token: header.correlation, slot: slot, device: deviceIndex)
        } else {
            byStoreID[id] = header.correlation
        }
        settle(slot, clearing: EndToEndWorkload.awaitingPushAck)
    }

    private func pushAcknowledged(_ link: BenchLink, header: FrameHeader, body: UnsafeRawBufferPointer) {
        link.outstanding -= 1
        guard let slot = runner.ops.slot(of: header.correlation) else { return }
        // Queued counts too: the device stays connected, so a push held behind its delivery
        // window still reaches it once the window has room.
        guard let written = FieldScan.uint32(of: FieldTag.written.rawValue, in: body),
              let queued = FieldScan.uint32(of: FieldTag.queued.rawValue, in: body), written + queued > 0 else {
            return fail(slot, "NOT_WRITTEN")
        }
        settle(slot, clearing: EndToEndWorkload.awaitingPushAck)
    }

    /// The device has the PUSH: acknowledge it to the gateway, then FETCH from the store.
    private func pushed(_ link: BenchLink, header: FrameHeader, body: UnsafeRawBufferPointer) {
        guard let idBytes = link.acknowledgePush(header: header, body: body) else { return runner.count("MALFORMED_PUSH") }
        guard let id = PayloadID(bytes: idBytes) else { return runner.count("MALFORMED_PUSH") }
        guard let token = byStoreID.removeValue(forKey: id) else {
            if sendTemplates != nil { earlyPushes[id] = link.index }
            return
        }
        guard let slot = runner.ops.slot(of: token) else { return }
        fetch(id, token: token, slot: slot, device: link.index)
    }

    private func fetch(_ id: PayloadID, token: UInt32, slot: Int, device index: Int) {
        let storeLink = deviceStores[index]
        guard let connection = storeLink.connection else { return fail(slot, "DEVICE_STORE_CONNECTION_CLOSED") }
        fetchTemplates[index].send(on: connection, correlation: token, id: id)
        storeLink.outstanding += 1
    }

    /// FETCH_OK: the device holds the payload (the latency's end); ACK it as shown. The
    /// FETCH's place on the device's link passes to the ACK.
    private func fetched(_ link: BenchLink, header: FrameHeader, body: UnsafeRawBufferPointer) {
        let now = Clocks.monotonicNanoseconds()
        guard let slot = runner.ops.slot(of: header.correlation) else {
            link.outstanding -= 1
            return
        }
        guard shownCount(body, slot: slot, device: link.index) == payloadSize, let connection = link.connection else {
            link.outstanding -= 1
            return fail(slot, sealing == nil ? "WRONG_PAYLOAD" : "SEALED_PAYLOAD_DID_NOT_OPEN")
        }
        fetchedAt[slot] = now
        ackTemplates[link.index].send(on: connection, correlation: header.correlation, id: storeID[slot])
        receipts[header.correlation] = runner.isMeasured(slot: slot)
        runner.followUpSent()
        settle(slot, clearing: EndToEndWorkload.awaitingFetchOK)
    }

    /// Bytes of text the device would show: the payload's, or what its sealed view opens to.
    private func shownCount(_ body: UnsafeRawBufferPointer, slot: Int, device index: Int) -> Int? {
        guard let sealing else { return FieldScan.value(of: FieldTag.payload.rawValue, in: body)?.count }
        guard let view = FieldScan.value(of: FieldTag.sealedPayload.rawValue, in: body) else { return nil }
        return sealing.open(view, id: storeID[slot], device: index)
    }

    private func receiptAnswered(_ link: BenchLink, header: FrameHeader, failure: String?) {
        guard let measured = receipts.removeValue(forKey: header.correlation) else {
            return runner.count("unexpected \(header.type?.specName ?? "frame")")
        }
        link.outstanding -= 1
        runner.followUpAnswered(measured: measured, end: Clocks.monotonicNanoseconds(), failure: failure)
    }

    private func settle(_ slot: Int, clearing bit: UInt8) {
        pending[slot] &= ~bit
        if pending[slot] == 0 { runner.complete(slot: slot, end: fetchedAt[slot]) }
    }

    private func fail(_ slot: Int, _ reason: String) {
        byStoreID.removeValue(forKey: storeID[slot])
        runner.fail(slot: slot, reason: reason)
    }

    func linkLost(_ link: BenchLink) {
        runner.abort(reason: "\(link.isDevice ? "device" : "provider") connection lost: \(link.failure ?? "closed")")
    }
}
