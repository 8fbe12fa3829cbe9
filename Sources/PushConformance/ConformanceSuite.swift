import PushClock
import PushSession
/// The suite's entry points: the catalogue of cases, selection by CASE arguments, and a
/// sequential run that reports each case as it finishes.
public enum ConformanceSuite {
    public enum SelectionError: Error, Equatable, CustomStringConvertible {
        case noMatch([String])

        public var description: String {
            switch self {
            case .noMatch(let selectors): "no case matches \(selectors.joined(separator: ", ")); `--list` shows the cases"
            }
        }
    }

    /// Every case, in running order; the vector cases come from the files found for
    /// `options.vectorsDirectory`.
    public static func catalogue(_ options: ConformanceOptions) -> [ConformanceCase] {
        let vectors = VectorSource.load(explicit: options.vectorsDirectory)
        return HandshakeCases.all + CredentialCases.all + FramingCases.all + FieldCases.all + ConnectionCases.all
            + PipelineCases.all + KeepaliveCases.all + FlowCases.all + TLSCases.all
            + VectorCases.cases(for: vectors)
            + StoreCases.all + SealedCases.all + SendCases.all + RegistryCases.all + TokenCases.all + GatewayCases.all
            // Last: it provokes the store's failed-login limit, which may also hold back
            // later logins from this host for the store's window.
            + StoreCases.rateLimit
    }

    /// The cases the selectors pick, in catalogue order; all of them for no selectors.
    public static func select(_ cases: [ConformanceCase], _ selectors: [String]) throws(SelectionError) -> [ConformanceCase] {
        guard !selectors.isEmpty else { return cases }
        let unmatched = selectors.filter { selector in !cases.contains { $0.matches(selector) } }
        guard unmatched.isEmpty else { throw .noMatch(unmatched) }
        return cases.filter { candidate in selectors.contains { candidate.matches($0) } }
    }

    /// The catalogue and the cases a run of `options` would execute, in order.
    public struct Plan: Sendable {
        public var catalogue: [ConformanceCase]
        public var selected: [ConformanceCase]
    }

    public static func plan(_ options: ConformanceOptions) throws(SelectionError) -> Plan {
        let catalogue = catalogue(options)
        return Plan(catalogue: catalogue, selected: try select(catalogue, options.selection))
    }

    public static func run(_ options: ConformanceOptions, probing: Bool = true,
                           progress: (CaseResult) -> Void = { _ in }) throws(SelectionError) -> ConformanceReport {
        run(try plan(options), options: options, probing: probing, progress: progress)
    }

    /// Runs the planned cases one after another, each on its own connections, and calls
    /// `progress` with each result as it is known.
    ///
    /// With `probing`, one HELLO to each service first makes sure something that speaks
    /// the protocol listens there; if not, no case runs and the report says why
    /// (`aborted`). A service that stops accepting connections during the run (refused)
    /// ends it too, after the case that found out.
    public static func run(_ plan: Plan, options: ConformanceOptions, probing: Bool = true,
                           progress: (CaseResult) -> Void = { _ in }) -> ConformanceReport {
        let run = RunState(options: options)
        let started = Clocks.monotonicMilliseconds()
        var results: [CaseResult] = []
        defer { run.close() }
        var aborted = probing && !plan.selected.isEmpty ? ServiceProbe.problem(options, run: run) : nil
        if aborted == nil {
            for conformanceCase in plan.selected {
                let result = execute(conformanceCase, run: run)
                results.append(result)
                progress(result)
                if let unreachable = run.unreachable {
                    aborted = unreachable
                    break
                }
            }
        }
        var report = ConformanceReport(results: results, catalogue: plan.catalogue, durationMs: Int(Clocks.monotonicMilliseconds() - started),
                                       options: options, runID: run.runID)
        report.aborted = aborted
        report.selectedCount = plan.selected.count
        return report
    }

    static func execute(_ conformanceCase: ConformanceCase, run: RunState) -> CaseResult {
        let context = CaseContext(run: run)
        let started = Clocks.monotonicMilliseconds()
        let verdict: Verdict
        let detail: String
        do {
            detail = try conformanceCase.body(context)
            verdict = .pass
        } catch {
            switch error {
            case .fail(let text): (verdict, detail) = (.fail, text)
            case .skip(let text): (verdict, detail) = (.skipped, text)
            }
        }
        let elapsed = Int(Clocks.monotonicMilliseconds() - started)
        context.finish()
        return CaseResult(id: conformanceCase.id, clause: conformanceCase.clause, title: conformanceCase.title,
                          verdict: verdict, detail: detail, durationMs: elapsed)
    }
}
