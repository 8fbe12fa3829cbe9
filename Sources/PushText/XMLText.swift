/// Text for an XML 1.0 element or attribute value, for the bench's SVG plot and the
/// conformance suite's JUnit report: the five markup characters as entities, tab and line
/// feed kept, and every character XML 1.0 cannot carry (other control characters,
/// U+FFFE, U+FFFF) as '?', so a peer's text can neither break the document nor vanish.
public enum XMLText {
    public static func escaped(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            case "\n", "\t": out.unicodeScalars.append(scalar)
            case _ where scalar.value < 0x20 || scalar.value == 0xFFFE || scalar.value == 0xFFFF: out += "?"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
