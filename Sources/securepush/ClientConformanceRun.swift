import ArgumentParser
import PushConformance

extension ClientKind: ExpressibleByArgument {}

/// `securepush conformance --client device|provider --client-cmd ...`: the suite plays the
/// servers and grades the client it starts.
extension ConformanceCommand {
    func validateClientRun() throws {
        guard let client else { throw ValidationError("--client-cmd goes with --client device or --client provider") }
        guard list || clientCmd != nil else { throw ValidationError("--client \(client.rawValue) needs --client-cmd, the command that starts the client") }
        guard store == nil, gateway == nil, dataDir == nil, user == nil else {
            throw ValidationError("--client plays the store and the gateway itself: --store, --gateway, --data-dir and --user do not apply")
        }
        guard (100...600_000).contains(timeoutMs) else { throw ValidationError("--timeout-ms must be 100 to 600000") }
        guard (1...64).contains(jobs) else { throw ValidationError("--jobs must be 1 to 64") }
        if let clientCmd {
            do { _ = try ClientCommandLine(clientCmd) } catch { throw ValidationError(error.description) }
        }
        do {
            _ = try ClientSuite.select(ClientSuite.catalogue(client), cases)
        } catch {
            throw ValidationError(error.description)
        }
    }

    func runClientSuite(_ kind: ClientKind) throws {
        if list { return try listClientCases(kind) }
        guard let clientCmd else { throw CommandFailure("--client-cmd is missing") }
        var options = ClientSuiteOptions(kind: kind, command: try ClientCommandLine(clientCmd))
        options.timeoutMs = Int64(timeoutMs)
        options.selection = cases
        options.jobs = jobs
        if trace {
            options.traceFailure = { id, lines in writeStandardError((["\(id):"] + lines.map { "  " + $0 }).joined(separator: "\n") + "\n") }
        }
        let selected = try ClientSuite.select(ClientSuite.catalogue(kind), cases)
        let layout = ConformanceReport.TableLayout(ids: selected.map(\.id), clauses: selected.map(\.clause))
        announce("securepush conformance: \(kind.rawValue) client `\(clientCmd)`, \(selected.count) cases")
        announce(layout.header)
        let report = try ClientSuite.run(options) { announce(layout.row($0)) }
        announce("")
        announce(report.summary)
        try writeReports(report)
        if report.hasFailures { throw ExitCode(1) }
    }

    private func listClientCases(_ kind: ClientKind) throws {
        let catalogue = ClientSuite.catalogue(kind)
        let selected = try ClientSuite.select(catalogue, cases)
        let layout = ConformanceReport.TableLayout(ids: selected.map(\.id), clauses: selected.map(\.clause))
        for item in selected {
            announce(item.id + String(repeating: " ", count: max(0, layout.idWidthForListing - item.id.count)) + "  "
                     + item.clause + String(repeating: " ", count: max(0, 8 - item.clause.count)) + "  " + item.title)
        }
        let judged = Set(catalogue.map(\.clause))
        let clauses = ClientSuite.clauses(kind)
        announce("")
        announce("\(selected.count) of \(catalogue.count) cases; the catalogue has cases for \(clauses.filter(judged.contains).count) of the \(clauses.count) \(kind.rawValue)-side clauses")
        for clause in clauses where !judged.contains(clause) {
            announce("  " + clause + String(repeating: " ", count: max(0, 7 - clause.count)) + "not covered: no case")
        }
    }
}
