/// One answer line of a provider under test (SPEC Appendix B.3): `<tag> OK ...` or
/// `<tag> ERROR <STATUS>`.
public struct ProviderAnswer: Equatable, Sendable {
    public var tag: String
    public var ok: Bool
    /// The words after OK (an id; written and queued), or the one word after ERROR.
    public var words: [String]
    public var atMs: Int64

    public init?(_ line: String, atMs: Int64) {
        let parts = line.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 2, !parts[0].isEmpty else { return nil }
        switch parts[1] {
        case "OK": ok = true
        case "ERROR" where parts.count == 3 && !parts[2].isEmpty: ok = false
        default: return nil
        }
        tag = parts[0]
        words = Array(parts.dropFirst(2))
        self.atMs = atMs
    }

    /// The status name of an ERROR answer.
    public var status: String? { ok ? nil : words.first }

    public var line: String { ([tag, ok ? "OK" : "ERROR"] + words).joined(separator: " ") }
}
