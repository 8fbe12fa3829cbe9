import PushClock
import PushEventLoop
import PushSecurity
import PushSession
import PushWire

/// One run's client side: the event loop on the calling thread, its driver and progress
/// line, and every link opened, all closed together at the end.
final class BenchSession {
    let scenario: Scenario
    let target: BenchTarget
    let loop: EventLoop
    let driver: LoopDriver
    let progress: ProgressLine
    private var links: [BenchLink] = []

    static let clientName = "securepush-bench"

    init(scenario: Scenario, target: BenchTarget, showProgress: Bool) throws(BenchError) {
        self.scenario = scenario
        self.target = target
        do {
            loop = try EventLoop()
        } catch {
            throw .setup("cannot create the event loop: \(error)")
        }
        driver = LoopDriver(loop: loop)
        progress = ProgressLine(scenario: scenario, enabled: showProgress)
        progress.start(loop: loop)
    }

    /// Closes every link (without telling owners), then the loop. Idempotent.
    func close() {
        progress.stop()
        for link in links { link.detach() }
        links = []
        driver.cancel()
        loop.shutdown()
    }

    /// The report's gateway parameters: the addresses, how many, and whether the embedded
    /// gateways ran as a cluster over nats-server.
    var gatewayParameters: [(String, ReportValue)] {
        var parameters: [(String, ReportValue)] = [("gateway", .text(target.gatewaysText)), ("gateways", .integer(target.gateways.count))]
        if target.isEmbedded { parameters.append(("nats", .boolean(target.nats != nil))) }
        return parameters
    }

    // MARK: links

    /// A provider connection; `capacity` is how many requests it may keep outstanding
    /// (the server's max_inflight may lower it).
    func providerLink(index: Int, capacity: Int, owner: LinkOwner, to audience: CredentialAudience) -> BenchLink {
        let hello = Hello(role: .provider, credential: target.credentials.provider(for: audience), maxInflight: UInt32(capacity),
                          name: BenchSession.clientName)
        return track(BenchLink(index: index, hello: hello, owner: owner), capacity: capacity)
    }

    /// A device's connection to the gateway, registered for the bench user and `tags`.
    func deviceGatewayLink(index: Int, device: String, tags: [String], owner: LinkOwner) -> BenchLink {
        let credential = target.credentials.registration(device: device, user: target.user, tags: tags)
        let hello = Hello(role: .device, credential: credential, maxInflight: 1, name: BenchSession.clientName)
        return track(BenchLink(index: index, device: device, hello: hello, owner: owner), capacity: 1)
    }

    /// A device's connection to the store (no credential: each request carries its token).
    func deviceStoreLink(index: Int, device: String, capacity: Int, owner: LinkOwner) -> BenchLink {
        let hello = Hello(role: .device, maxInflight: UInt32(capacity), name: BenchSession.clientName)
        return track(BenchLink(index: index, device: device, hello: hello, owner: owner), capacity: capacity)
    }

    private func track(_ link: BenchLink, capacity: Int) -> BenchLink {
        link.capacity = capacity
        links.append(link)
        return link
    }

    /// Opens `links` to `endpoint` and waits until all are ready (or throws).
    @discardableResult
    func connect(_ group: [BenchLink], to endpoint: HostPort, phase: String, tolerateFailures: Bool = false) throws(BenchError) -> Connector {
        try connect(group, to: [endpoint], phase: phase, tolerateFailures: tolerateFailures)
    }

    /// Connects the links of `group` to `endpoints` in turn (the first link to the first).
    @discardableResult
    func connect(_ group: [BenchLink], to endpoints: [HostPort], phase: String, tolerateFailures: Bool = false) throws(BenchError) -> Connector {
        guard !endpoints.isEmpty else { throw .setup("no address to connect to") }
        let connector = Connector(loop: loop, tls: target.tls, serverName: target.serverName)
        for (link, endpoint) in zip(group, BenchSession.spread(group.count, over: endpoints)) { connector.add(link, to: endpoint) }
        progress.status = { "\(phase): \(connector.ready)/\(connector.total) ready, \(connector.failed) failed" }
        try connector.run(phase: phase, driver: driver, tolerateFailures: tolerateFailures)
        return connector
    }

    /// Where each of `count` links goes: the endpoints in turn, the first link to the
    /// first, so that every node of a cluster gets its share of devices and providers.
    static func spread(_ count: Int, over endpoints: [HostPort]) -> [HostPort] {
        guard !endpoints.isEmpty else { return [] }
        return (0..<max(0, count)).map { endpoints[$0 % endpoints.count] }
    }

    // MARK: measuring

    /// Runs `workload` at the runner's pace until the run is over; the CPU each process
    /// used while measured goes into the runner's report, with the push path's CPU per
    /// delivery and, in a cluster run, the NATS messages per push.
    func measure(_ runner: Runner, _ workload: Workload) throws(BenchError) {
        runner.workload = workload
        defer { runner.finish() }
        progress.follow(runner)
        var cpu = CPUUsage(stores: target.storePIDs, gateways: target.gatewayPIDs, nats: target.nats?.pid,
                           countPostgres: target.database != nil)
        let nats = target.nats
        var natsBefore: NATSCounters?
        driver.onHeartbeat = { [unowned runner] in
            runner.heartbeat()
            if !cpu.hasBegun, Clocks.monotonicNanoseconds() >= runner.measureStart {
                cpu.begin()
                natsBefore = nats?.counters()
            }
        }
        defer { driver.onHeartbeat = nil }
        try runner.start(loop: loop)
        if runner.shape.warmupSeconds == 0 {
            cpu.begin()
            natsBefore = nats?.counters()
        }
        try driver.drive(phase: "\(scenario.rawValue) run", timeoutSeconds: runner.timeoutSeconds) { runner.isFinished }
        cpu.end()
        let natsAfter = nats?.counters()
        runner.extras += cpu.extras
        // Each measured operation sends one PUSH and reaches `deliveriesPerOperation` devices.
        let deliveries = Double(runner.completedMeasured) * Double(runner.deliveriesPerOperation)
        if scenario.needsGateway, deliveries > 0, let seconds = cpu.pushPathSeconds {
            runner.extras.append(("cpu_us_per_delivery", (seconds * 1e6 / deliveries * 100).rounded() / 100))
        }
        if nats != nil, natsBefore == nil || natsAfter == nil {
            // Not a failed operation, but a figure the run was asked for: say so in the report.
            runner.count("nats-server /varz unreadable")
        } else if let natsBefore, let natsAfter, let perPush = natsAfter.perPush(since: natsBefore, pushes: runner.completedMeasured) {
            runner.extras.append(("nats_in_msgs_per_push", (perPush.inbound * 100).rounded() / 100))
            runner.extras.append(("nats_out_msgs_per_push", (perPush.outbound * 100).rounded() / 100))
        }
        progress.status = nil
    }

    /// A quick pipelined run used to prepare a scenario (stored payloads, logins).
    func prepare(_ runner: Runner, _ workload: Workload, phase: String) throws(BenchError) {
        runner.workload = workload
        defer { runner.finish() }
        driver.onHeartbeat = { [unowned runner] in runner.heartbeat() }
        defer { driver.onHeartbeat = nil }
        progress.status = { [unowned runner] in "\(phase): \(runner.completedAll) done" }
        try runner.start(loop: loop)
        try driver.drive(phase: phase, timeoutSeconds: runner.timeoutSeconds) { runner.isFinished }
        if !runner.errors.isEmpty {
            let summary = runner.errors.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            throw .setup("\(phase) failed: \(summary)")
        }
    }
}
