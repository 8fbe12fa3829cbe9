@testable import PushNATS
import Testing

/// JetStream's API replies as the gateway reads them, and the requests it writes, through
/// Codable (JSONDecoder, JSONEncoder). The replies are nats-server's own shapes.
struct JetStreamJSONTests {
    private func message(_ text: String) -> NATSMessage { NATSMessage(subject: "_INBOX.x", data: Array(text.utf8)) }

    @Test("a PubAck gives its sequence, read exactly to UInt64.max; members it does not need are skipped")
    func pubAck() throws {
        let reply = JetStreamJSON.reply(message(#"{"stream":"KV","domain":"hub","seq":18446744073709551615,"duplicate":true}"#), as: PubAck.self)
        #expect(try reply.get().seq == UInt64.max)
        #expect(try JetStreamJSON.reply(message(#" {"seq":7,"stream":"K\u0056"} "#), as: PubAck.self).get().stream == "KV")
    }

    @Test("an error member is .jetStream with its code, err_code and description; err_code and description may be missing or of another type")
    func errors() {
        let inUse = #"{"type":"io.nats.jetstream.api.v1.stream_create_response","error":{"code":400,"err_code":10058,"#
            + #""description":"stream name already in use with a different configuration"}}"#
        #expect(JetStreamJSON.reply(message(inUse), as: IgnoredReply.self).failure
            == .jetStream(code: 400, errorCode: 10058, description: "stream name already in use with a different configuration"))
        let wrongLast = #"{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 1"},"stream":"Q","seq":0}"#
        #expect(JetStreamJSON.reply(message(wrongLast), as: PubAck.self).failure?.isWrongLastSequence == true)
        #expect(JetStreamJSON.reply(message(#"{"error":{"code":503}}"#), as: PubAck.self).failure
            == .jetStream(code: 503, errorCode: 0, description: ""))
        #expect(JetStreamJSON.reply(message(#"{"error":{"code":503,"err_code":"x","description":7}}"#), as: PubAck.self).failure
            == .jetStream(code: 503, errorCode: 0, description: ""))
    }

    @Test("stream info after CREATE is accepted whatever it holds")
    func streamInfo() {
        let info = #"{"type":"io.nats.jetstream.api.v1.stream_create_response","config":{"name":"S","subjects":["a.>"],"#
            + #""max_age":1500000000,"allow_direct":true},"created":"2026-12-02T04:00:00.1Z","state":{"messages":0,"first_seq":0},"did_create":true}"#
        #expect(JetStreamJSON.reply(message(info), as: IgnoredReply.self).failure == nil)
    }

    @Test("not JSON, not an object, an error without a code, a PubAck without stream or seq, a status: .malformedReply")
    func malformed() {
        let bad = ["", "{", "{\"a\":1,}", "[1]", "\"text\"", "{} x", "{\"stream\":\"KV\"}", "{\"seq\":1}", "{\"stream\":\"KV\",\"seq\":-1}",
                   "{\"stream\":\"KV\",\"seq\":\"1\"}", "{\"error\":{}}", "{\"error\":null}", "{\"error\":{\"code\":\"400\"}}"]
        for text in bad {
            guard case .malformedReply? = JetStreamJSON.reply(message(text), as: PubAck.self).failure else {
                Issue.record("accepted or misread: \(text)")
                continue
            }
        }
        let invalidUTF8 = NATSMessage(subject: "x", data: Array("{\"stream\":\"".utf8) + [0xFF] + Array("\",\"seq\":1}".utf8))
        guard case .malformedReply? = JetStreamJSON.reply(invalidUTF8, as: PubAck.self).failure else {
            Issue.record("invalid UTF-8 accepted")
            return
        }
        let status = NATSMessage(subject: "x", data: [], headers: [("Status", "503")])
        guard case .malformedReply? = JetStreamJSON.reply(status, as: IgnoredReply.self).failure else {
            Issue.record("a status message accepted")
            return
        }
    }

    @Test("a stream config becomes the JSON JetStream expects, byte for byte")
    func streamConfig() throws {
        let config = StreamConfig(name: "S\"1", subjects: ["a.>", "b"], maxMessagesPerSubject: 1, maxAge: .milliseconds(1500))
        let text = String(decoding: try config.json(), as: UTF8.self)
        #expect(text == #"{"allow_direct":true,"discard":"old","max_age":1500000000,"max_bytes":-1,"max_consumers":-1,"#
            + #""max_msg_size":-1,"max_msgs":-1,"max_msgs_per_subject":1,"name":"S\"1","num_replicas":1,"retention":"limits","#
            + #""storage":"file","subjects":["a.>","b"]}"#)
        let last = String(decoding: try JetStreamJSON.encode(LastBySubjectRequest(subject: "q.d/1")), as: UTF8.self)
        #expect(last == #"{"last_by_subj":"q.d/1"}"#)
    }
}
