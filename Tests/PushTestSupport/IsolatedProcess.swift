#if canImport(Glibc)
import Glibc
#endif
import PushProcess
import Testing

/// Runs the body of a test that changes process-wide state (an rlimit, a full descriptor
/// table, a signal disposition) or measures it (RSS) in a child process of its own: every
/// test target runs in one process, in parallel, so such a test would disturb the others
/// and be disturbed by them.
///
/// The test process is the test bundle run again with this one test as its filter and
/// SECUREPUSH_ISOLATED_CHILD naming the test; there the body runs. The parent records a
/// failure unless the child exited 0 having run the body (it prints a marker line), and
/// shows the child's output when it did not.
public func inIsolatedProcess(timeoutSeconds: Double = 120, sourceLocation: SourceLocation = #_sourceLocation,
                              _ body: () throws -> Void) throws {
    guard let test = Test.current else {
        Issue.record("inIsolatedProcess is for the body of a @Test", sourceLocation: sourceLocation)
        return
    }
    let name = IsolatedProcess.childName(of: test)
    if IsolatedProcess.childTestName == name {
        try body()
        print(IsolatedProcess.marker + name)
        return
    }
    let arguments = ["\(IsolatedProcess.variable)=\(name)", ChildProcess.currentExecutable,
                     "--testing-library", "swift-testing", "--filter", IsolatedProcess.filter(for: test)]
    let child = try ChildProcess(executable: "/usr/bin/env", arguments: arguments, name: "isolated \(test.name)")
    guard let status = child.wait(seconds: timeoutSeconds) else {
        child.killHard()
        Issue.record("the isolated child did not finish within \(Int(timeoutSeconds)) s:\n\(child.standardOutput)",
                     sourceLocation: sourceLocation)
        return
    }
    let output = child.standardOutput + child.standardError
    let ran = output.split(separator: "\n").contains { $0 == IsolatedProcess.marker + name }
    #expect(status == 0 && ran, "the isolated child \(ran ? "failed (status \(status))" : "did not run the test"):\n\(output)",
            sourceLocation: sourceLocation)
}

enum IsolatedProcess {
    static let variable = "SECUREPUSH_ISOLATED_CHILD"
    static let marker = "isolated child ran "

    /// The test this process runs as an isolated child, if it is one.
    static var childTestName: String? {
        getenv(variable).map { String(cString: $0) }
    }

    /// What names the test to the child: its ID, source location included.
    static func childName(of test: Test) -> String { test.id.description }

    /// swift-testing's --filter is a regular expression matched against test IDs
    /// ("Module.Suite/function()"): this one test's, with its punctuation escaped.
    static func filter(for test: Test) -> String {
        let id = ([test.id.moduleName] + test.id.nameComponents.dropLast()).joined(separator: ".") + "/" + test.name
        let special = Set("\\^$.|?*+()[]{}")
        return String(id.flatMap { special.contains($0) ? ["\\", $0] : [$0] })
    }
}
