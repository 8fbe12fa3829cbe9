import Foundation
import Testing
import PushText

@Suite("JSON string literals")
struct JSONTextTests {
    @Test("quotes, backslashes and control characters are escaped, and the literal parses back to the text")
    func escapes() throws {
        let text = "a \"quoted\" \\ path\nline\ttab\r\u{01}\u{7F} é 😀"
        let literal = JSONText.quoted(text)
        #expect(literal == "\"a \\\"quoted\\\" \\\\ path\\nline\\ttab\\r\\u0001\\u007f é 😀\"")
        let parsed = try JSONSerialization.jsonObject(with: Data(literal.utf8), options: .fragmentsAllowed) as? String
        #expect(parsed == text)
    }

    @Test("asciiOnly escapes every non-ASCII character as UTF-16 units, and still parses back")
    func asciiOnly() throws {
        let literal = JSONText.quoted("é 😀", asciiOnly: true)
        #expect(literal == "\"\\u00e9 \\ud83d\\ude00\"")
        #expect(literal.unicodeScalars.allSatisfy { $0.isASCII })
        let parsed = try JSONSerialization.jsonObject(with: Data(literal.utf8), options: .fragmentsAllowed) as? String
        #expect(parsed == "é 😀")
    }
}
