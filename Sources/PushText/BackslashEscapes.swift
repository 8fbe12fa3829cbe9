/// The one escaper for text written between double quotes with backslash escapes: JSON
/// string literals (`JSONText`) and the Prometheus text format's help text and label
/// values. Each format is a set of rules over the same loop; a character outside its set
/// is copied as it is.
public struct BackslashEscapes: Sendable {
    /// `"` becomes `\"` (not in Prometheus' help text, where it is plain).
    let quote: Bool
    /// Control characters and DEL: `\r`, `\t`, else `\u00XX` (JSON only; Prometheus has
    /// no escape for them).
    let controls: Bool
    /// Every other non-ASCII character as `\uXXXX` UTF-16 units, so the text is plain ASCII.
    let nonASCII: Bool

    /// A JSON string's content: quotes, backslashes and control characters (DEL included).
    public static let json = BackslashEscapes(quote: true, controls: true, nonASCII: false)
    /// `json`, and non-ASCII as UTF-16 units: plain ASCII whatever a peer put in the text.
    public static let jsonASCII = BackslashEscapes(quote: true, controls: true, nonASCII: true)
    /// A Prometheus label value: backslash, double quote and line feed.
    public static let prometheusLabel = BackslashEscapes(quote: true, controls: false, nonASCII: false)
    /// A Prometheus `# HELP` text: backslash and line feed.
    public static let prometheusHelp = BackslashEscapes(quote: false, controls: false, nonASCII: false)

    /// `text` escaped, without surrounding quotes.
    public func escaped(_ text: String) -> String {
        var out = ""
        append(text, to: &out)
        return out
    }

    public func append(_ text: String, to out: inout String) {
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\"" where quote: out += "\\\""
            case "\r" where controls: out += "\\r"
            case "\t" where controls: out += "\\t"
            case _ where (controls && (scalar.value < 0x20 || scalar.value == 0x7F)) || (nonASCII && scalar.value > 0x7E):
                for unit in String(scalar).utf16 {
                    let hex = String(unit, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                }
            default:
                out.unicodeScalars.append(scalar)
            }
        }
    }
}
