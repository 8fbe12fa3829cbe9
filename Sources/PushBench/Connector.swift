import PushClock
import PushEventLoop
import PushSession

/// Opens many links without flooding the listener: at most `maxConcurrent` connects and
/// handshakes at once (a backlog of thousands of SYNs would overflow the accept queue
/// and turn into retransmits seconds long), each new one started as another finishes.
/// The default stays within the unauthenticated connections a server holds from one
/// source address (`ServiceLimits.defaultMaxPendingPerAddress`); more would be closed.
final class Connector {
    private let loop: EventLoop
    private var queue: [(BenchLink, HostPort, String?)] = []
    private var next = 0
    private var inProgress = 0
    private let maxConcurrent: Int
    private let tls: TLSContext?
    private let serverName: String?
    private var sources = SourceAddressPlan()
    private(set) var ready = 0
    private(set) var failed = 0
    /// Failure reasons and how often each occurred.
    private(set) var failures: [String: UInt64] = [:]

    init(loop: EventLoop, tls: TLSContext? = nil, serverName: String? = nil,
         maxConcurrent: Int = ServiceLimits.defaultMaxPendingPerAddress) {
        self.loop = loop
        self.tls = tls
        self.serverName = serverName
        self.maxConcurrent = maxConcurrent
    }

    var total: Int { queue.count }
    var isDone: Bool { ready + failed == queue.count }

    /// Queues `link` for `endpoint`; connections beyond what one source address can carry
    /// to one destination get another 127.0.0.x (loopback destinations only).
    func add(_ link: BenchLink, to endpoint: HostPort) {
        queue.append((link, endpoint, sources.next(for: endpoint)))
    }

    func start() { launch() }

    private func launch() {
        while inProgress < maxConcurrent, next < queue.count {
            let (link, endpoint, source) = queue[next]
            next += 1
            inProgress += 1
            link.setup = self
            link.open(loop: loop, to: endpoint, source: source, tls: tls, serverName: serverName)
        }
    }

    func linkReady(_ link: BenchLink) {
        link.setup = nil
        inProgress -= 1
        ready += 1
        launch()
    }

    func linkFailed(_ link: BenchLink) {
        link.setup = nil
        inProgress -= 1
        failed += 1
        failures[link.failure ?? "failed", default: 0] += 1
        launch()
    }

    /// The most common failure, for an error message.
    var firstFailure: String { failures.max { $0.value < $1.value }.map { "\($0.key) (\($0.value)x)" } ?? "" }

    /// How long one link may take from connect to HELLO_OK. Connects are paced, so
    /// this is one handshake's time, far above what a live service needs.
    static let setupSeconds = 10.0

    /// Opens everything queued and drives the loop until each link is ready or failed.
    /// Throws if any failed and `tolerateFailures` is false.
    func run(phase: String, driver: LoopDriver, tolerateFailures: Bool = false) throws(BenchError) {
        start()
        let seconds = 30 + Double(queue.count) / 500
        var lastCheck = Clocks.monotonicNanoseconds()
        driver.onHeartbeat = { [unowned self] in
            let now = Clocks.monotonicNanoseconds()
            guard now - lastCheck >= 500_000_000 else { return }
            lastCheck = now
            for (link, _, _) in queue[..<next] where link.secondsSinceOpen > Connector.setupSeconds {
                link.abandonSetup(after: Connector.setupSeconds)
            }
        }
        defer { driver.onHeartbeat = nil }
        try driver.drive(phase: phase, timeoutSeconds: seconds) { self.isDone }
        if failed > 0, !tolerateFailures {
            throw .connect("\(phase): \(failed) of \(queue.count) connections failed: \(firstFailure)")
        }
    }
}

/// Chooses source addresses so that no (source, destination) pair needs more ephemeral
/// ports than the range holds (32768-60999 here: about 28k): the first
/// `perAddress` connections to a destination use the default source, the next ones
/// 127.0.0.2, then 127.0.0.3, and so on.
struct SourceAddressPlan {
    static let perAddress = 25_000
    private var counts: [String: Int] = [:]

    mutating func next(for endpoint: HostPort) -> String? {
        let key = endpoint.description
        let index = counts[key, default: 0]
        counts[key] = index + 1
        let block = index / SourceAddressPlan.perAddress
        guard block > 0, endpoint.isIPv4Loopback, block < 254 else { return nil }
        return "127.0.0.\(1 + block)"
    }
}
