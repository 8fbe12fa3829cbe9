import PushClock
import PushEventLoop

/// `http`: `POST /v1/messages` to the store's HTTP provider API over keep-alive
/// connections, each with one request in flight (the server does not pipeline): closed
/// loop with `--connections` requests in flight, or open loop at `--rate`. An operation
/// is one POST -> `201 Created`, which the store answers once the payload and its push
/// are committed (the path of the binary protocol's SEND); it runs from the request's
/// first byte written (its intended start, open loop) to the response read whole.
///
/// Every request is the same bytes: the bench user as the recipient, `--payload-size`
/// bytes of text, and a push to one enrolled device that never connects (the gateway
/// queues it, which keeps the push's commit and hand-off in the path at the least cost).
enum HTTPBenchmark {
    static func run(_ session: BenchSession, _ shape: LoadShape) throws(BenchError) -> BenchReport {
        guard let http = session.target.http else { throw .setup("no store HTTP API to benchmark") }
        guard shape.inflight == 1 else {
            throw .invalid("http keeps one request in flight per connection (no pipelining): raise --connections instead of --inflight")
        }
        if session.target.isEmbedded { try session.target.enrollDevices([http.device]) }
        let runner = Runner(shape: shape)
        let workload = HTTPWorkload(runner: runner)
        let request = HTTPRequestTemplate.post(http, payloadSize: shape.payloadSize)
        let links = (0..<shape.connections).map { HTTPLink(index: $0, request: request) }
        defer { for link in links { link.close() } }
        try connect(links, to: http.endpoint, session: session)
        workload.use(links)
        try session.measure(runner, workload)
        var parameters: [(String, ReportValue)] = [("store", .text("http://\(http.endpoint)")), ("request", .text("http"))]
        if session.target.isEmbedded { parameters += session.gatewayParameters }
        return runner.report(scenario: .http, parameters: parameters)
    }

    /// Opens every link and waits until each is connected; throws on the first failure.
    private static func connect(_ links: [HTTPLink], to endpoint: HostPort, session: BenchSession) throws(BenchError) {
        var settled = 0
        var failure: String?
        for link in links {
            link.onSetup = { link in
                settled += 1
                if !link.isReady, failure == nil { failure = link.failure ?? "connect failed" }
            }
            link.open(loop: session.loop, to: endpoint)
        }
        session.progress.status = { "connecting to http://\(endpoint): \(settled)/\(links.count)" }
        try session.driver.drive(phase: "connecting to the store's HTTP API", timeoutSeconds: 30) { settled == links.count }
        if let failure { throw .connect("\(links.count - links.filter(\.isReady).count) of \(links.count) http connections failed: \(failure)") }
    }
}

/// Sends each operation on an idle link; a 201 completes it, any other status fails it
/// with the status and the problem's code, and a lost link ends the run.
final class HTTPWorkload: Workload, HTTPLinkOwner {
    private unowned let runner: Runner
    private var links: [HTTPLink] = []
    /// Links with no request outstanding, by index (a stack: the last freed goes first).
    private var idle: [Int] = []

    init(runner: Runner) { self.runner = runner }

    func use(_ links: [HTTPLink]) {
        self.links = links
        idle = links.indices.reversed().map { $0 }
        for link in links { link.owner = self }
    }

    func issue(token: UInt32, slot: Int) -> Bool {
        while let index = idle.popLast() {
            if links[index].send(token: token) { return true }
        }
        return false
    }

    func answered(_ link: HTTPLink, token: UInt32, outcome: HTTPResponseReader.Outcome, end: UInt64) {
        idle.append(link.index)
        switch outcome {
        case .created: runner.complete(token: token, end: end)
        case .failed(let reason): runner.fail(token: token, reason: reason)
        }
    }

    func linkLost(_ link: HTTPLink, reason: String) {
        runner.abort(reason: reason)
    }
}
