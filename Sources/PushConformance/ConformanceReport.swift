import PushEventLoop
/// The outcome of a run: every case's verdict and what the run covered of the spec.
public struct ConformanceReport: Sendable {
    public struct Uncovered: Sendable, Equatable {
        public var clause: String
        public var reason: String
    }

    public var results: [CaseResult]
    /// Clauses with at least one case that ran (PASS or FAIL).
    public var coveredClauses: [String]
    public var notCovered: [Uncovered]
    public var clausesTotal: Int
    public var durationMs: Int
    public var store: HostPort?
    public var gateway: HostPort?
    public var runID: String
    /// Why the run stopped before its last case (the target speaks no securepush, or is
    /// down); nil when every selected case ran.
    public var aborted: String?
    /// How many cases the run meant to run.
    public var selectedCount: Int

    public var passed: Int { results.filter { $0.verdict == .pass }.count }
    public var failed: Int { results.filter { $0.verdict == .fail }.count }
    public var skipped: Int { results.filter { $0.verdict == .skipped }.count }
    public var hasFailures: Bool { failed > 0 }
    /// Failed cases, or a run that could not finish: either way the target is not shown to conform.
    public var isFailure: Bool { hasFailures || aborted != nil }

    /// What was graded: "servers", or the kind of client (`--client device`).
    public var subject = "servers"
    /// The clauses the coverage figure counts: the whole spec for servers, the client-side
    /// clauses for a client.
    public var clauseScope = "clauses"

    /// Builds the coverage figures from the results and the catalogue the run chose from.
    init(results: [CaseResult], catalogue: [ConformanceCase], durationMs: Int, options: ConformanceOptions, runID: String) {
        self.init(results: results, clauses: SpecClauses.all, catalogued: Set(catalogue.map(\.clause)),
                  notJudged: SpecClauses.notTestableFromTheWire, durationMs: durationMs, runID: runID)
        store = options.store
        gateway = options.gateway
    }

    /// Coverage of `clauses` by `results`; `catalogued` are the clauses some case of the
    /// catalogue judges, `notJudged` the ones no case can, with why.
    init(results: [CaseResult], clauses: [String], catalogued: Set<String>, notJudged: [String: String], durationMs: Int,
         runID: String) {
        self.results = results
        self.durationMs = durationMs
        self.runID = runID
        selectedCount = results.count
        let ran = Set(results.filter { $0.verdict.ran }.map(\.clause))
        coveredClauses = clauses.filter { ran.contains($0) }
        clausesTotal = clauses.count
        let resultByClause = Dictionary(grouping: results, by: \.clause)
        notCovered = clauses.filter { !ran.contains($0) }.map { clause in
            if let reason = notJudged[clause] { return Uncovered(clause: clause, reason: "not testable from the wire: \(reason)") }
            if let skippedCase = resultByClause[clause]?.first { return Uncovered(clause: clause, reason: "skipped: \(skippedCase.detail)") }
            if catalogued.contains(clause) { return Uncovered(clause: clause, reason: "not selected") }
            return Uncovered(clause: clause, reason: "no case")
        }
    }

    // MARK: text

    /// Column widths for the table, from the ids and clauses that will appear in it.
    public struct TableLayout: Sendable {
        var idWidth: Int
        var clauseWidth: Int

        public init(ids: [String], clauses: [String]) {
            idWidth = max(4, ids.map(\.count).max() ?? 0)
            clauseWidth = max(6, clauses.map(\.count).max() ?? 0)
        }

        public var header: String { row("CASE", "CLAUSE", "VERDICT", "DETAIL") }

        /// The width of the id column, for listings that share the table's alignment.
        public var idWidthForListing: Int { idWidth }

        public func row(_ result: CaseResult) -> String {
            row(result.id, result.clause, result.verdict.rawValue, result.detail)
        }

        private func row(_ id: String, _ clause: String, _ verdict: String, _ detail: String) -> String {
            func pad(_ text: String, _ width: Int) -> String { text + String(repeating: " ", count: max(0, width - text.count)) }
            return pad(id, idWidth) + "  " + pad(clause, clauseWidth) + "  " + pad(verdict, 7) + "  " + detail
        }
    }

    public var layout: TableLayout { TableLayout(ids: results.map(\.id), clauses: results.map(\.clause)) }

    /// The whole table, one row per case.
    public var table: String {
        let layout = layout
        return ([layout.header] + results.map(layout.row)).joined(separator: "\n")
    }

    /// Totals, coverage and the clauses not covered, with why.
    public var summary: String {
        var lines: [String] = []
        if let aborted { lines.append("stopped after \(results.count) of \(selectedCount) cases: \(aborted)") }
        lines.append("\(results.count) cases: \(passed) passed, \(failed) failed, \(skipped) skipped in \(durationMs) ms")
        // A run stopped before its first case covered nothing: the list would be every clause.
        guard !(aborted != nil && results.isEmpty) else { return lines.joined(separator: "\n") }
        lines.append("\(clauseScope) covered: \(coveredClauses.count) of \(clausesTotal) (a clause is covered when a case for it ran)")
        if !notCovered.isEmpty {
            lines.append("not covered:")
            lines += notCovered.map { "  " + $0.clause + String(repeating: " ", count: max(0, 7 - $0.clause.count)) + $0.reason }
        }
        return lines.joined(separator: "\n")
    }
}
