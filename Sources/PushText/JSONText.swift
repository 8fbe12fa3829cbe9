/// JSON string literals, for the JSON logs, the bench report and the conformance report.
/// (JSON that is read, and the JetStream and HTTP API bodies, go through Codable.)
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
        (asciiOnly ? BackslashEscapes.jsonASCII : BackslashEscapes.json).append(text, to: &out)
        out += "\""
    }
}
