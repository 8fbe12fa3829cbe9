@testable import PushEventLoop
import Testing

extension EventLoopSuite {
    /// The head recorder and the RFC 9112 checks, with no sockets.
    @Suite struct HTTPRequestHeadTests {
        static let head = Array("\r\nPOST /v1/messages?x=1 HTTP/1.1\r\nHost: x\nContent-Length: 0\r\ncontent-length: 5\r\n\r\nhello".utf8)

        /// Fed whole, byte by byte, or split at every offset, the recorder ends the head at
        /// the same byte, and the check finds the same broken rule.
        @Test func theHeadIsFoundWhereverTheReadsSplitIt() throws {
            let end = Self.head.count - 5
            var whole = HTTPHeadRecorder(limit: 1_000)
            whole.append(Self.head)
            #expect(whole.headEnd == end)
            var single = HTTPHeadRecorder(limit: 1_000)
            for byte in Self.head { single.append([byte]) }
            #expect(single.headEnd == end)
            for split in 0...Self.head.count {
                var recorder = HTTPHeadRecorder(limit: 1_000)
                recorder.append(Self.head[..<split])
                recorder.append(Self.head[split...])
                #expect(recorder.headEnd == end, "split at \(split)")
                let bytes = try #require(recorder.head)
                #expect(HTTPRequestHead.check(bytes) == .refused(.duplicateContentLength))
            }
        }

        @Test func aHeadOverTheLimitOverflowsAndARestartStartsAfresh() {
            var recorder = HTTPHeadRecorder(limit: 10)
            recorder.append(Array("GET / HTTP/1.1\r\n".utf8))
            #expect(recorder.overflowed && recorder.head == nil && !recorder.isOpen)
            recorder.restart(with: Array(Array("GET / HTTP/1.0\r\n\r\n".utf8).prefix(11)))
            #expect(recorder.overflowed)
            var next = HTTPHeadRecorder(limit: 100)
            next.restart(with: Array("GET / HTTP/1.0\r\n\r\nGET".utf8))
            #expect(next.headEnd == 18)
        }

        @Test func theParsedHeadGivesItsFieldsAndPath() throws {
            let bytes = Array("GET http://h/v1/messages/ab?q HTTP/1.1\r\nHost: h\r\nAuthorization:  Bearer t \r\n\r\n".utf8)
            let head = try #require(HTTPRequestHead.parse(bytes[...]))
            #expect(head.method == "GET" && head.path == "/v1/messages/ab" && head.isHTTP11OrLater)
            #expect(head.header("authorization") == "Bearer t" && head.values("HOST") == ["h"])
            #expect(HTTPRequestHead.parse(Array("GET / HTTP/1.1\r\n\r\n".utf8)[...]) == nil, "no Host: refused, not parsed")
            #expect(HTTPRequestHead.check(Array("garbage\r\n\r\n".utf8)[...]) == .unreadable)
            #expect(HTTPRequestHead.check(Array("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n".utf8)[...]) == .passes)
            #expect(HTTPRequestHead.check(Array("HEAD / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n".utf8)[...]) == .passes)
            #expect(HTTPRequestHead.check(Array("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: CHUNKED\r\n\r\n".utf8)[...]) == .passes)
        }
    }
}
