import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import PushText
import Testing

@Suite("Prometheus and XML escaping")
struct EscapeTests {
    @Test("Prometheus label values escape backslash, double quote and line feed only; help text backslash and line feed")
    func prometheus() {
        let text = "a \"b\" \\ c\nd\te\r\u{01} é"
        #expect(BackslashEscapes.prometheusLabel.escaped(text) == "a \\\"b\\\" \\\\ c\\nd\te\r\u{01} é")
        #expect(BackslashEscapes.prometheusHelp.escaped(text) == "a \"b\" \\\\ c\\nd\te\r\u{01} é")
        #expect(BackslashEscapes.prometheusLabel.escaped("plain") == "plain")
    }

    @Test("XML: the five markup characters as entities, tab and line feed kept, what XML 1.0 cannot carry as '?'")
    func xml() throws {
        let text = "<a href=\"x\">&'</a>\t\n\r\u{01}\u{FFFE}\u{FFFF} é 😀"
        let escaped = XMLText.escaped(text)
        #expect(escaped == "&lt;a href=&quot;x&quot;&gt;&amp;&apos;&lt;/a&gt;\t\n???? é 😀")
        let document = try XMLDocument(xmlString: "<r a=\"\(escaped)\">\(escaped)</r>")
        #expect(document.rootElement()?.stringValue == "<a href=\"x\">&'</a>\t\n???? é 😀")
    }
}
