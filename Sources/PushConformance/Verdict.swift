/// What one case concluded. A case that did not run (a missing service, credential or
/// flag) is SKIPPED and does not count towards clause coverage.
public enum Verdict: String, Sendable, Equatable, CaseIterable {
    case pass = "PASS"
    case fail = "FAIL"
    case skipped = "SKIPPED"

    /// True when the case exercised the peer, whatever it found.
    public var ran: Bool { self != .skipped }
}

/// How a case stops early. The only error a case body throws: every socket or protocol
/// problem is turned into one of these with a sentence saying what was expected.
public enum CaseStop: Error, Equatable, Sendable, CustomStringConvertible {
    /// The peer did something the spec forbids, or did not do what it requires.
    case fail(String)
    /// The case cannot be judged in this run (say, no gateway or no credentials given).
    case skip(String)

    public var description: String {
        switch self {
        case .fail(let text): "FAIL: \(text)"
        case .skip(let text): "SKIPPED: \(text)"
        }
    }
}

/// One row of the report.
public struct CaseResult: Sendable, Equatable {
    public var id: String
    public var clause: String
    public var title: String
    public var verdict: Verdict
    public var detail: String
    public var durationMs: Int

    public init(id: String, clause: String, title: String, verdict: Verdict, detail: String, durationMs: Int) {
        self.id = id
        self.clause = clause
        self.title = title
        self.verdict = verdict
        self.detail = detail
        self.durationMs = durationMs
    }
}
