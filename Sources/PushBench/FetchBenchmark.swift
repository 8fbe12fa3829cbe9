import PushClock
import PushEventLoop
import PushSession
import PushWire

/// `fetch`: payloads are stored first (`preloadCount`, by one pipelining provider), then
/// device connections FETCH them round-robin, each enrolled in the registry and with its
/// own fetch token signed with the deployment's server key (exactly what LOGIN would have
/// returned). An operation is
/// FETCH -> FETCH_OK carrying the whole payload.
enum FetchBenchmark {
    static let preloadCount = 10_000

    static func run(_ session: BenchSession, _ shape: LoadShape) throws(BenchError) -> BenchReport {
        guard let store = session.target.store else { throw .setup("no store to benchmark") }
        let ids = try preload(session, store: store, shape: shape)

        let runner = Runner(shape: shape)
        let workload = FetchWorkload(runner: runner, ids: ids, payloadSize: shape.payloadSize)
        var templates: [FrameTemplate] = []
        let names = (0..<shape.connections).map { "bench-fetch-\($0)" }
        try session.target.enrollDevices(names)
        let links = names.enumerated().map { index, device in
            let token = session.target.credentials.fetchToken(device: device, user: session.target.user)
            templates.append(FrameTemplate(.fetch(Fetch(id: PayloadID(high: 0, low: 0), token: token))))
            return session.deviceStoreLink(index: index, device: device,
                                           capacity: shape.rate == nil ? shape.inflight : LoadShape.maxOutstanding, owner: workload)
        }
        try session.connect(links, to: session.target.stores, phase: "connecting devices")
        workload.use(links, templates: templates)
        try session.measure(runner, workload)
        return runner.report(scenario: .fetch, parameters: [("store", .text(session.target.storesText)), ("payloads", .integer(ids.count))])
    }

    /// Stores the payloads to fetch; returns their ids.
    private static func preload(_ session: BenchSession, store: HostPort, shape: LoadShape) throws(BenchError) -> [PayloadID] {
        let loadShape = LoadShape(connections: 1, devices: 1, inflight: 256, rate: nil, stop: .count(preloadCount),
                                  payloadSize: shape.payloadSize, warmupSeconds: 0)
        let runner = Runner(shape: loadShape)
        let workload = StoreWorkload(runner: runner)
        workload.storedIDs = []
        let link = session.providerLink(index: 0, capacity: loadShape.inflight, owner: workload, to: .store)
        try session.connect([link], to: store, phase: "connecting the preloading provider")
        workload.use([link], template: StoreBenchmark.template(user: session.target.user, payloadSize: shape.payloadSize))
        try session.prepare(runner, workload, phase: "storing \(preloadCount) payloads")
        link.detach()
        guard let ids = workload.storedIDs, ids.count == preloadCount else { throw .setup("the preload stored too few payloads") }
        return ids
    }
}

/// Sends FETCHes round-robin over the device links, cycling through the stored ids.
final class FetchWorkload: Workload, LinkOwner {
    private unowned let runner: Runner
    private let ids: [PayloadID]
    private let payloadSize: Int
    private var links: [BenchLink] = []
    private var templates: [FrameTemplate] = []
    private var rotation = LinkRotation()
    private var nextID = 0

    init(runner: Runner, ids: [PayloadID], payloadSize: Int) {
        self.runner = runner
        self.ids = ids
        self.payloadSize = payloadSize
    }

    func use(_ links: [BenchLink], templates: [FrameTemplate]) {
        self.links = links
        self.templates = templates
    }

    func issue(token: UInt32, slot: Int) -> Bool {
        guard let index = rotation.pick(links), let connection = links[index].connection else { return false }
        templates[index].send(on: connection, correlation: token, id: ids[nextID])
        nextID = nextID + 1 == ids.count ? 0 : nextID + 1
        links[index].outstanding += 1
        return true
    }

    func frame(on link: BenchLink, header: FrameHeader, body: UnsafeRawBufferPointer) {
        link.outstanding -= 1
        switch header.rawType {
        case MessageType.fetchOK.rawValue:
            // The payload must be all there: a short read would flatter the figures.
            guard FieldScan.value(of: FieldTag.payload.rawValue, in: body)?.count == payloadSize else {
                runner.fail(token: header.correlation, reason: "WRONG_PAYLOAD")
                return
            }
            runner.complete(token: header.correlation, end: Clocks.monotonicNanoseconds())
        case MessageType.error.rawValue:
            runner.fail(token: header.correlation, reason: header.status.name)
        default:
            runner.fail(token: header.correlation, reason: "unexpected \(header.type?.specName ?? "frame")")
        }
    }

    func linkLost(_ link: BenchLink) {
        runner.abort(reason: "device connection lost: \(link.failure ?? "closed")")
    }
}
