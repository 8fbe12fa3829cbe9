/// JSON string literals, for the JSON logs, the bench report and the conformance report.
public enum JSONText {
    /// `text` as a JSON string literal: quotes, backslashes and control characters (DEL
    /// included) escaped. With `asciiOnly`, every other non-ASCII character is escaped too
    /// (as UTF-16 units), so the output is plain ASCII whatever a peer put in the text.
    public static func quoted(_ text: String, asciiOnly: Bool = false) -> String {
        var out = ""
        appendQuoted(text, to: &out, asciiOnly: asciiOnly)
        return out
    }

    public static func appendQuoted(_ text: String, to out: inout String, asciiOnly: Bool = false) {
        out += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F || (asciiOnly && scalar.value > 0x7E):
                for unit in String(scalar).utf16 {
                    let hex = String(unit, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                }
            default:
                out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}
