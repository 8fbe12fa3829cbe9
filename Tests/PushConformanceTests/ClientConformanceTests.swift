import Foundation
import PushConformance
import PushProcess
import PushTestSupport
import Testing

/// `securepush conformance --client`: README's commands (the shipped clients and the Python
/// mini device) pass every case through the real CLI; the mini clients of ClientFixtures
/// pass every case without a fault; and each of their faults fails exactly the cases its
/// line in `device-faults.txt` / `provider-faults.txt` names, so every case is shown able to
/// fail and no fault spills into cases about other rules. (A fault may stand for a family:
/// a decoder that lets malformed PUSHes through fails every such vector case.)
@Suite("Grading clients", .ownThread)
struct ClientConformanceTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    static let fixtures = root + "/Tests/PushConformanceTests/ClientFixtures"
    /// Debian's interpreter starts in a tenth of the CPU time pyenv's takes, which counts
    /// with a process per case.
    static let python = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : "python3"
    static let miniDevice = "\(python) \(fixtures)/mini_device.py --gateway {gateway} --store {store} --credential {credential} --state {state} --device {device} --user {user}"
    static let miniProvider = "\(python) \(fixtures)/mini_provider.py --store {store} --gateway {gateway} --provider-key {provider-key}"
    static let jobs = 8

    /// README's block of client-check commands, with `securepush` made this build's binary
    /// and relative paths made absolute.
    static func readmeCommands() throws -> [[String]] {
        let readme = try String(contentsOfFile: root + "/README.md", encoding: .utf8)
        guard let start = readme.range(of: "<!-- client-check:begin -->"), let end = readme.range(of: "<!-- client-check:end -->") else {
            return []
        }
        let lines = readme[start.upperBound..<end.lowerBound].split(separator: "\n").filter { $0.hasPrefix("securepush ") }
        return try lines.map { line in
            try ClientCommandLine(String(line)).words.map { word in
                word.replacingOccurrences(of: "securepush ", with: SecurePushBinary.path + " ")
                    .replacingOccurrences(of: "python3 Tests/", with: "\(python) \(root)/Tests/")
            }
        }
    }

    @Test("README's commands grade the shipped device and provider clients and the Python device: every case passes")
    func readmeCommandsPass() throws {
        let commands = try Self.readmeCommands()
        #expect(commands.count == 3)
        for command in commands {
            let result = try ChildProcess.run(executable: SecurePushBinary.path, arguments: Array(command.dropFirst()), seconds: 300)
            let summary = result.stdout.split(separator: "\n").first { $0.contains(" cases: ") } ?? "no summary"
            #expect(result.status == 0, "\(command.joined(separator: " ")): \(summary)\n\(result.stdout.suffix(3_000))")
            #expect(summary.contains("0 failed, 0 skipped"), "\(summary)")
        }
    }

    @Test("a client run without its command, or with a placeholder that does not exist, is refused before anything starts")
    func badClientRuns() throws {
        for arguments in [["conformance", "--client", "device"],
                          ["conformance", "--client", "device", "--client-cmd", "mydevice {gatway}"],
                          ["conformance", "--client", "device", "--client-cmd", "x", "--store", "127.0.0.1:1"],
                          ["conformance", "--client", "device", "--client-cmd", "x", "no.such.case"]] {
            let result = try SecurePushBinary.run(arguments)
            #expect(result.status != 0 && result.status != 1, "\(arguments): \(result.status)")
            #expect(!result.stderr.isEmpty, "\(arguments)")
        }
    }

    static func run(_ kind: ClientKind, _ template: String, selection: [String] = [], jobs: Int = jobs,
                    timeoutMs: Int64 = 15_000) throws -> ConformanceReport {
        var options = ClientSuiteOptions(kind: kind, command: try ClientCommandLine(template))
        options.jobs = jobs
        options.selection = selection
        // A loaded test machine starts a process late; only failing cases wait this long.
        options.timeoutMs = timeoutMs
        return try ClientSuite.run(options)
    }

    static func failures(_ report: ConformanceReport) -> [String] {
        report.results.filter { $0.verdict != .pass }.map { "\($0.id) \($0.verdict.rawValue): \($0.detail)" }
    }

    @Test("the Python mini provider without a fault passes every provider case")
    func miniProviderPasses() async throws {
        let report = try await onOwnThread { try Self.run(.provider, Self.miniProvider) }
        #expect(Self.failures(report).isEmpty, "\(Self.failures(report))")
    }

    /// One line of a faults file: the fault and the cases it must fail, its own case first.
    struct FaultLine: Sendable {
        var fault: String
        var failing: [String]
    }

    static func faultLines(_ kind: ClientKind) -> [FaultLine] {
        guard let text = try? String(contentsOfFile: "\(fixtures)/\(kind.rawValue)-faults.txt", encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            let words = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0]
                .split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            guard words.count >= 2 else { return nil }
            return FaultLine(fault: words[0], failing: Array(words.dropFirst()))
        }
    }

    @Test("every case is failed by some fault of a mini client", arguments: ClientKind.allCases)
    func everyCaseCanFail(kind: ClientKind) {
        let lines = Self.faultLines(kind)
        let failed = Set(lines.flatMap(\.failing))
        let missing = ClientSuite.catalogue(kind).map(\.id).filter { !failed.contains($0) }
        #expect(missing.isEmpty, "cases no fault fails: \(missing)")
        let unknown = lines.flatMap(\.failing).filter { id in !ClientSuite.catalogue(kind).contains { $0.id == id } }
        #expect(unknown.isEmpty, "cases the faults file names that do not exist: \(unknown)")
    }

    /// The fault matrix, two faults at a time, at one of two depths set apart from the rest
    /// of the suite (minutes of clients side by side would load the other tests' timing
    /// cases; `.ci/run` runs it on its own before `swift test`):
    ///
    /// - `SECUREPUSH_CLIENT_FAULTS=1`: each fault runs only the cases its line names and must
    ///   fail every one of them: every case is shown able to fail (a few minutes; CI gates on it);
    /// - `SECUREPUSH_CLIENT_FAULTS=whole`: each fault runs the whole suite (the vector cases
    ///   only for the faults whose line names some, the decoder's) and must fail exactly its
    ///   line, so no fault spills into cases about other rules (a quarter of an hour; run it
    ///   after changing cases or faults).
    ///
    /// A fault whose cases come out otherwise is run again alone before it counts: a spurious
    /// FAIL under load must not pass for a fault's effect, and a real one fails twice.
    static let faultDepth = ProcessInfo.processInfo.environment["SECUREPUSH_CLIENT_FAULTS"]

    @Test("each fault of a mini client fails exactly the cases its line names (SECUREPUSH_CLIENT_FAULTS=1 or whole)",
          .enabled(if: faultDepth == "1" || faultDepth == "whole"), arguments: ClientKind.allCases)
    func faultsFailTheirCases(kind: ClientKind) async throws {
        let base = kind == .device ? Self.miniDevice : Self.miniProvider
        let lines = Self.faultLines(kind)
        #expect(!lines.isEmpty)
        let whole = Self.faultDepth == "whole"
        let named = ClientSuite.catalogue(kind).map(\.id).filter { !$0.contains(".vector.") }
        @Sendable func mismatch(_ line: FaultLine, jobs: Int) throws -> String? {
            let selection = !whole ? line.failing : line.failing.contains { $0.contains(".vector.") } ? [] : named
            // Run alone, a fault's own cases are all meant to fail: each waits for what the
            // client never does, so the CLI's default timeout, not the whole-suite one, bounds them.
            let report = try Self.run(kind, base + " --fault \(line.fault)", selection: selection, jobs: jobs,
                                      timeoutMs: whole ? 15_000 : 5_000)
            let failed = Set(report.results.filter { $0.verdict != .pass }.map(\.id))
            guard failed != Set(line.failing) else { return nil }
            let unexpected = Self.failures(report).filter { entry in !line.failing.contains { entry.hasPrefix($0 + " ") } }
            return "--fault \(line.fault): expected \(line.failing.sorted()), got \(failed.sorted()); \(unexpected)"
        }
        let mismatches = try await withThrowingTaskGroup(of: String?.self) { group in
            var pending = lines[...]
            var found: [String] = []
            func start() {
                guard let line = pending.popFirst() else { return }
                group.addTask {
                    try await onOwnThread {
                        guard try mismatch(line, jobs: Self.jobs) != nil else { return nil }
                        return try mismatch(line, jobs: 2)
                    }
                }
            }
            for _ in 0..<2 { start() }
            while let result = try await group.next() {
                if let result { found.append(result) }
                start()
            }
            return found
        }
        #expect(mismatches.isEmpty, "\(mismatches.joined(separator: "\n"))")
    }
}
