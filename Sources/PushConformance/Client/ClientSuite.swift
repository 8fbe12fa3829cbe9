#if canImport(Glibc)
import Glibc
#endif
import PushClock
import Synchronization

/// `securepush conformance --client`: the catalogue of client cases, selection, and a
/// run that gives each case fresh servers, a fresh state directory and a fresh client.
public enum ClientSuite {
    public static func catalogue(_ kind: ClientKind) -> [ClientCase] {
        switch kind {
        case .device: DeviceCases.all
        case .provider: ProviderCases.all
        }
    }

    /// The clauses a run for `kind` counts its coverage against.
    public static func clauses(_ kind: ClientKind) -> [String] {
        let judged = Set(catalogue(kind).map(\.clause))
        return SpecClauses.all.filter { judged.contains($0) || SpecClauses.bindsClient($0, kind) }
    }

    public static func select(_ cases: [ClientCase], _ selectors: [String]) throws(ConformanceSuite.SelectionError) -> [ClientCase] {
        guard !selectors.isEmpty else { return cases }
        let unmatched = selectors.filter { selector in !cases.contains { $0.matches(selector) } }
        guard unmatched.isEmpty else { throw .noMatch(unmatched) }
        return cases.filter { candidate in selectors.contains { candidate.matches($0) } }
    }

    /// Runs the selected cases one after another and calls `progress` with each result.
    public static func run(_ options: ClientSuiteOptions, progress: @escaping @Sendable (CaseResult) -> Void = { _ in }) throws(ConformanceSuite.SelectionError) -> ConformanceReport {
        let catalogue = catalogue(options.kind)
        let selected = try select(catalogue, options.selection)
        let started = Clocks.monotonicMilliseconds()
        var template = Array("/tmp/securepush-client-conformance-XXXXXX".utf8CString)
        let runDirectory = template.withUnsafeMutableBufferPointer { buffer -> String? in
            guard let base = buffer.baseAddress, let made = mkdtemp(base) else { return nil }
            return String(cString: made)
        }
        let results = runCases(selected, options: options, runDirectory: runDirectory, progress: progress)
        if let runDirectory { removeTree(runDirectory) }
        var report = ConformanceReport(results: results, clauses: clauses(options.kind), catalogued: Set(catalogue.map(\.clause)),
                                       notJudged: SpecClauses.notJudgedForClients, durationMs: Int(Clocks.monotonicMilliseconds() - started),
                                       runID: String(UInt32.random(in: 0...UInt32.max), radix: 16))
        report.selectedCount = selected.count
        report.subject = "\(options.kind.rawValue) client"
        report.clauseScope = "\(options.kind.rawValue)-side clauses"
        return report
    }

    /// Each case on one of `options.jobs` workers. `progress` is told of each result in
    /// catalogue order, as soon as it and every case before it are done (on a worker).
    static func runCases(_ selected: [ClientCase], options: ClientSuiteOptions, runDirectory: String?,
                         progress: @escaping @Sendable (CaseResult) -> Void) -> [CaseResult] {
        guard let runDirectory else {
            let failure = "cannot make a directory under /tmp: \(String(cString: strerror(errno)))"
            return selected.map { CaseResult(id: $0.id, clause: $0.clause, title: $0.title, verdict: .fail, detail: failure, durationMs: 0) }
        }
        // The results so far, and the index of the next one to report.
        let board = Mutex<(results: [Int: CaseResult], nextReported: Int)>(([:], 0))
        CaseWorkers.run(count: selected.count, workers: options.jobs) { index in
            let result = execute(selected[index], number: index + 1, options: options, runDirectory: runDirectory)
            board.withLock { state in
                state.results[index] = result
                while let ready = state.results[state.nextReported] {
                    progress(ready)
                    state.nextReported += 1
                }
            }
        }
        return board.withLock { state in (0..<selected.count).compactMap { state.results[$0] } }
    }

    static func execute(_ clientCase: ClientCase, number: Int, options: ClientSuiteOptions, runDirectory: String) -> CaseResult {
        var caseOptions = options
        var limits = HarnessLimits(store: options.storeLimits, gateway: options.gatewayLimits)
        clientCase.limits(&limits)
        caseOptions.storeLimits = limits.store
        caseOptions.gatewayLimits = limits.gateway
        let started = Clocks.monotonicMilliseconds()
        var verdict = Verdict.pass
        var detail: String
        var harness: ClientHarness?
        do {
            let made = try ClientHarness(options: caseOptions, caseNumber: number, runDirectory: runDirectory)
            harness = made
            detail = try clientCase.body(made)
        } catch {
            switch error {
            case .fail(let text): (verdict, detail) = (.fail, text)
            case .skip(let text): (verdict, detail) = (.skipped, text)
            }
        }
        if verdict == .fail, let harness, let traceFailure = options.traceFailure { traceFailure(clientCase.id, harness.trace) }
        harness?.finish()
        return CaseResult(id: clientCase.id, clause: clientCase.clause, title: clientCase.title, verdict: verdict,
                          detail: detail, durationMs: Int(Clocks.monotonicMilliseconds() - started))
    }

    /// Removes a directory the run made, with what the clients left in it.
    static func removeTree(_ path: String) {
        guard let directory = opendir(path) else {
            unlink(path)
            return
        }
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard name != ".", name != ".." else { continue }
            let child = path + "/" + name
            var info = stat()
            if lstat(child, &info) == 0, info.st_mode & S_IFMT == S_IFDIR { removeTree(child) } else { unlink(child) }
        }
        closedir(directory)
        rmdir(path)
    }
}
