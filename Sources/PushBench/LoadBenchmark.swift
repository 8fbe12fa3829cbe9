/// `securepush bench SCENARIO`: one load scenario against a target, measured.
public struct LoadBenchmark: Sendable {
    public var scenario: Scenario
    public var shape: LoadShape
    public var target: TargetOptions
    /// Draw a live status line on stderr (only if it is a terminal).
    public var showProgress: Bool
    /// The securepush version, for the report.
    public var version: String?

    public init(scenario: Scenario, shape: LoadShape, target: TargetOptions, showProgress: Bool = true) {
        self.scenario = scenario
        self.shape = shape
        self.target = target
        self.showProgress = showProgress
    }

    public func run() throws(BenchError) -> BenchReport {
        let startedAt = Timestamp.now()
        try shape.validate()
        let limit = raiseOpenFileLimit()
        let needed = descriptorsNeeded + 64
        guard needed <= limit else {
            throw .invalid("\(scenario.rawValue) with these flags needs about \(needed) open files; the limit is \(limit)")
        }
        let prepared = try BenchTarget.prepare(target, scenario: scenario, payloadSize: shape.payloadSize)
        defer { prepared.close() }
        // Durable writes wait for the disk: its fsync time explains the store's figures.
        let fsync = scenario.needsStore && !prepared.storePIDs.isEmpty && prepared.database == nil && !prepared.dataDirectory.isEmpty ? DiskProbe.fsyncMedianMicros(in: prepared.dataDirectory) : nil
        let session = try BenchSession(scenario: scenario, target: prepared, showProgress: showProgress)
        defer { session.close() }
        var report = try run(scenario, session)
        if let fsync { report.extra.append(("disk_fsync_p50_us", fsync)) }
        report.parameters.append(("tls", .boolean(target.tls != nil || target.embeddedTLS)))
        report.version = version
        report.startedAt = startedAt
        return report
    }

    private func run(_ scenario: Scenario, _ session: BenchSession) throws(BenchError) -> BenchReport {
        switch scenario {
        case .store: try StoreBenchmark.run(session, shape, bySend: target.bySend)
        case .fetch: try FetchBenchmark.run(session, shape)
        case .push: try PushBenchmark.run(session, shape)
        case .fanout: try FanoutBenchmark.run(session, shape)
        case .e2e: try EndToEndBenchmark.run(session, shape, bySend: target.bySend, sealedSuite: target.sealedSuite)
        case .connections: try ConnectionsBenchmark.run(session, shape)
        case .http: try HTTPBenchmark.run(session, shape)
        }
    }

    /// This process's sockets for the run (the services are other processes).
    private var descriptorsNeeded: Int {
        switch scenario {
        case .store: shape.connections
        case .fetch: shape.connections + 1
        case .push, .fanout: shape.connections + shape.devices
        case .e2e: (target.bySend ? 1 : 2) * shape.connections + 2 * shape.devices
        case .connections, .http: shape.connections
        }
    }
}
