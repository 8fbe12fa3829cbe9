/// One conformance check: a name, the spec clause it judges, and a body that talks to the
/// peer over fresh connections and returns a short detail on success.
///
/// A case names exactly one clause, so the coverage figure never counts a clause that a
/// case only brushes against.
public struct ConformanceCase: Sendable {
    public typealias Body = @Sendable (CaseContext) throws(CaseStop) -> String

    public var id: String
    public var clause: String
    public var title: String
    let body: Body

    public init(_ id: String, clause: String, _ title: String, body: @escaping Body) {
        self.id = id
        self.clause = clause
        self.title = title
        self.body = body
    }

    /// A case that cannot run in this build or with these inputs, kept in the list so
    /// the report says why rather than silently dropping it.
    static func unavailable(_ id: String, clause: String, _ title: String, reason: String) -> ConformanceCase {
        ConformanceCase(id, clause: clause, title) { _ throws(CaseStop) in throw .skip(reason) }
    }

    /// Whether a CASE argument selects this case: its id or a prefix of the id, or a
    /// clause or clause prefix ("4.7" selects 4.7-1 to 4.7-4 but not 4.70-1; "4" selects
    /// every 4.x clause).
    public func matches(_ selector: String) -> Bool {
        ConformanceCase.matches(id: id, clause: clause, selector)
    }

    /// The rule of `matches`, for the client suite's cases too.
    static func matches(id: String, clause: String, _ selector: String) -> Bool {
        if id == selector || id.hasPrefix(selector) { return true }
        if clause == selector { return true }
        return clause.hasPrefix(selector + "-") || clause.hasPrefix(selector + ".")
    }
}
