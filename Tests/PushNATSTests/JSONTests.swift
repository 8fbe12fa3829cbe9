@testable import PushNATS
import Testing

/// The strict reader behind the JetStream replies.
struct JSONTests {
    @Test("objects, arrays, escapes and 64-bit numbers read exactly")
    func reads() throws {
        let text = #"{"stream":"KV","seq":18446744073709551615,"ok":true,"n":null,"a":[1,-2.5e3,"\u00e9\ud83d\ude00\n"],"o":{}}"#
        let value = try JSONValue.parse(Array(text.utf8))
        #expect(value["stream"]?.stringValue == "KV")
        #expect(value["seq"]?.uint64Value == UInt64.max)
        #expect(value["ok"] == .bool(true))
        #expect(value["n"] == .null)
        #expect(value["a"] == .array([.number("1"), .number("-2.5e3"), .string("é😀\n")]))
        #expect(value["o"] == .object([]))
        #expect(value["missing"] == nil)
    }

    @Test("malformed input is .malformedReply, never a crash")
    func rejects() {
        let bad = ["", "{", "{\"a\":1,}", "[1,]", "{'a':1}", "01", "1.", "\"\u{01}\"", "\"\\x\"", "\"\\ud800\"", "{} x", "tru",
                   String(repeating: "[", count: 100) + String(repeating: "]", count: 100)]
        for text in bad {
            #expect(throws: NATSError.self, "\(text)") { try JSONValue.parse(Array(text.utf8)) }
        }
        #expect(throws: NATSError.self) { try JSONValue.parse([0x22, 0xFF, 0x22]) }
    }

    @Test("quote() escapes what JSON requires")
    func quotes() throws {
        let quoted = JSONValue.quote("a\"b\\c\nd\u{01}é")
        #expect(quoted == #""a\"b\\c\nd\u0001é""#)
        #expect(try JSONValue.parse(Array(quoted.utf8)) == .string("a\"b\\c\nd\u{01}é"))
    }

    @Test("a stream config becomes the JSON JetStream expects")
    func streamConfig() throws {
        let config = StreamConfig(name: "S", subjects: ["a.>", "b"], maxMessagesPerSubject: 1, maxAge: .milliseconds(1500))
        let value = try JSONValue.parse(Array(config.json().utf8))
        #expect(value["max_age"] == .number("1500000000"))
        #expect(value["max_msgs_per_subject"] == .number("1"))
        #expect(value["subjects"] == .array([.string("a.>"), .string("b")]))
        #expect(value["allow_direct"] == .bool(true))
        #expect(value["discard"] == .string("old") && value["storage"] == .string("file"))
    }
}
