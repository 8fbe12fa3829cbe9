import PushText
/// One parameter of a report: counts and settings are numbers in the JSON (scripts compare
/// them), addresses and names are strings.
public enum ReportValue: Sendable, Equatable {
    case integer(Int)
    case number(Double)
    case text(String)
    case boolean(Bool)

    /// The value as a JSON literal.
    var json: String {
        switch self {
        case .integer(let value): String(value)
        case .number(let value): jsonNumber(value)
        case .text(let value): jsonString(value)
        case .boolean(let value): value ? "true" : "false"
        }
    }

    /// The value for the table: `5` rather than `5.0` for whole numbers.
    public var display: String {
        switch self {
        case .integer(let value): String(value)
        case .number(let value): value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value)
        case .text(let value): value
        case .boolean(let value): value ? "yes" : "no"
        }
    }
}

/// A JSON number with at most two decimals (whole from 100 up); null for NaN and
/// infinities, which JSON cannot carry.
func jsonNumber(_ value: Double) -> String {
    guard value.isFinite else { return "null" }
    if abs(value) >= 100 {
        return abs(value) < 1e15 ? String(Int(value.rounded())) : String(value)
    }
    let hundredths = (value * 100).rounded(.towardZero) / 100
    return hundredths == hundredths.rounded() ? String(Int(hundredths)) : String(hundredths)
}

/// A JSON string literal: error reasons can carry quotes or control characters.
func jsonString(_ text: String) -> String { JSONText.quoted(text) }
