import PushClock
import PushSession
import PushWire

/// `store`: providers pipeline STOREs of `--payload-size` bytes for the bench user. An
/// operation is STORE -> STORE_OK, which the store sends only once the payload is
/// durable (group commit: one fsync for every STORE pending when the writer wakes).
/// With `bySend` an operation is SEND -> SEND_OK: the payload and a push to an enrolled
/// device that never connects, committed together, the push then handed to a gateway;
/// the same work as `bench http`'s POST, over the protocol.
enum StoreBenchmark {
    /// Stored payloads live an hour: long enough for any run, short enough that a run
    /// against a real deployment cleans up after itself.
    static let ttlSeconds: UInt32 = 3_600

    static func run(_ session: BenchSession, _ shape: LoadShape, bySend: Bool = false) throws(BenchError) -> BenchReport {
        guard let store = session.target.store else { throw .setup("no store to benchmark") }
        if bySend, session.target.isEmbedded { try session.target.enrollDevices([HTTPTarget.benchDevice]) }
        let runner = Runner(shape: shape)
        let workload = StoreWorkload(runner: runner)
        let links = (0..<shape.connections).map {
            session.providerLink(index: $0, capacity: shape.rate == nil ? shape.inflight : LoadShape.maxOutstanding, owner: workload, to: .store)
        }
        try session.connect(links, to: session.target.stores, phase: "connecting providers")
        let template = bySend ? sendTemplate(user: session.target.user, payloadSize: shape.payloadSize)
            : template(user: session.target.user, payloadSize: shape.payloadSize)
        workload.use(links, template: template)
        try session.measure(runner, workload)
        return runner.report(scenario: .store, parameters: [("store", .text(session.target.storesText)),
                                                            ("request", .text(bySend ? "send" : "store"))])
    }

    static func template(user: String, payloadSize: Int) -> FrameTemplate {
        FrameTemplate(.store(StoreRequest(user: user, payload: payload(size: payloadSize), ttlSeconds: ttlSeconds)))
    }

    static func sendTemplate(user: String, payloadSize: Int) -> FrameTemplate {
        FrameTemplate(.send(SendRequest(user: user, payload: payload(size: payloadSize), ttlSeconds: ttlSeconds,
                                        target: .device(HTTPTarget.benchDevice), pushTTLSeconds: EndToEndBenchmark.pushTTLSeconds)))
    }

    /// Not all one byte value, so nothing downstream can shortcut it.
    static func payload(size: Int) -> [UInt8] {
        (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
    }
}

/// Sends STOREs round-robin over the provider links that have room; optionally keeps the
/// ids the store hands back (the fetch scenario's preload).
final class StoreWorkload: Workload, LinkOwner {
    private unowned let runner: Runner
    private var links: [BenchLink] = []
    private var templates: [FrameTemplate] = []
    private var rotation = LinkRotation()
    /// When non-nil, every stored id is appended here.
    var storedIDs: [PayloadID]?

    init(runner: Runner) { self.runner = runner }

    func use(_ links: [BenchLink], template: FrameTemplate) {
        self.links = links
        templates = Array(repeating: template, count: links.count)
    }

    func issue(token: UInt32, slot: Int) -> Bool {
        guard let index = rotation.pick(links), let connection = links[index].connection else { return false }
        templates[index].send(on: connection, correlation: token)
        links[index].outstanding += 1
        return true
    }

    func frame(on link: BenchLink, header: FrameHeader, body: UnsafeRawBufferPointer) {
        link.outstanding -= 1
        switch header.rawType {
        case MessageType.storeOK.rawValue, MessageType.sendOK.rawValue:
            if storedIDs != nil, let id = FieldScan.payloadID(in: body) { storedIDs?.append(id) }
            runner.complete(token: header.correlation, end: Clocks.monotonicNanoseconds())
        case MessageType.error.rawValue:
            runner.fail(token: header.correlation, reason: header.status.name)
        default:
            runner.fail(token: header.correlation, reason: "unexpected \(header.type?.specName ?? "frame")")
        }
    }

    func linkLost(_ link: BenchLink) {
        runner.abort(reason: "provider connection lost: \(link.failure ?? "closed")")
    }
}
