import Foundation
import PushEventLoop
import Testing
@testable import PushBench

/// The bench's reader of the store's HTTP responses: whole responses however the bytes
/// arrive, the failure reason of a problem, and a clear error for what it cannot read.
struct HTTPResponseReaderTests {
    static let created = response(201, "application/json",
                                  #"{"created_at":"2026-01-01T00:00:00.000Z","expires_at":"2026-01-01T01:00:00.000Z","id":"00ff","replayed":false}"#)
    static let unprocessable = response(422, "application/problem+json",
                                        #"{"code":"UNKNOWN_USER","detail":"no such user","status":422,"title":"Unprocessable Content","type":"about:blank"}"#)

    static func response(_ status: Int, _ type: String, _ body: String) -> [UInt8] {
        let body = Array(body.utf8)
        let head = "HTTP/1.1 \(status) Reason Phrase\r\nContent-Type: \(type)\r\nDate: Sun, 29 Nov 2026 07:00:00 GMT\r\n"
            + "content-length: \(body.count)\r\n\r\n"
        return Array(head.utf8) + body
    }

    /// Feeds `chunks` one read at a time; every outcome taken after each.
    private func read(_ chunks: [[UInt8]]) throws(HTTPResponseReader.Malformed) -> [[HTTPResponseReader.Outcome]] {
        var reader = HTTPResponseReader()
        var outcomes: [[HTTPResponseReader.Outcome]] = []
        for chunk in chunks {
            reader.append(chunk)
            var taken: [HTTPResponseReader.Outcome] = []
            while let outcome = try reader.next() { taken.append(outcome) }
            outcomes.append(taken)
        }
        return outcomes
    }

    @Test func aWholeResponseInOneRead() throws {
        #expect(try read([Self.created]) == [[.created]])
    }

    /// Split at every byte boundary: nothing until the last byte, then the response.
    @Test func aResponseSplitAcrossReads() throws {
        let bytes = Self.created
        for cut in 1..<bytes.count {
            let outcomes = try read([Array(bytes[..<cut]), Array(bytes[cut...])])
            #expect(outcomes == [[], [.created]], "cut at \(cut)")
        }
        let byteAtATime = try read(bytes.map { [$0] })
        #expect(byteAtATime.dropLast().allSatisfy { $0.isEmpty })
        #expect(byteAtATime.last == [.created])
    }

    @Test func twoResponsesInOneRead() throws {
        #expect(try read([Self.created + Self.unprocessable]) == [[.created, .failed("422 UNKNOWN_USER")]])
        // And one and a half, then the rest.
        let both = Self.created + Self.created
        let cut = Self.created.count + 10
        #expect(try read([Array(both[..<cut]), Array(both[cut...])]) == [[.created], [.created]])
    }

    @Test func aProblemFailsWithItsStatusAndCode() throws {
        #expect(try read([Self.unprocessable]) == [[.failed("422 UNKNOWN_USER")]])
        let spaced = Self.response(401, "application/problem+json", #"{"type":"about:blank", "code" : "BAD_TOKEN"}"#)
        #expect(try read([spaced]) == [[.failed("401 BAD_TOKEN")]])
        // No code (evhttp's own HTML answers): the status alone.
        let plain = Self.response(400, "text/html", "<html><body>Bad Request</body></html>")
        #expect(try read([plain]) == [[.failed("400")]])
    }

    @Test func aBadStatusLineIsAnError() {
        for line in ["HTTX/1.1 201 Created", "HTTP/1.1 2O1 Created", "HTTP/1.1201 Created", "garbage"] {
            let bytes = Array("\(line)\r\nContent-Length: 0\r\n\r\n".utf8)
            #expect(throws: HTTPResponseReader.Malformed.self, "\(line)") { try read([bytes]) }
            do {
                _ = try read([bytes])
            } catch {
                #expect(error.reason.hasPrefix("a bad status line"), "\(error.reason)")
            }
        }
    }

    @Test func unreadableBodiesAreErrors() {
        let chunked = Array("HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".utf8)
        #expect(throws: HTTPResponseReader.Malformed.self) { try read([chunked]) }
        let unsized = Array("HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n\r\n{}".utf8)
        #expect(throws: HTTPResponseReader.Malformed.self) { try read([unsized]) }
        let badLength = Array("HTTP/1.1 201 Created\r\nContent-Length: -1\r\n\r\n".utf8)
        #expect(throws: HTTPResponseReader.Malformed.self) { try read([badLength]) }
        let endless = Array("HTTP/1.1 201 Created\r\n".utf8) + Array(repeating: UInt8(ascii: "x"), count: HTTPResponseReader.maxHeadBytes + 10)
        #expect(throws: HTTPResponseReader.Malformed.self) { try read([endless]) }
    }

    @Test func informationalResponsesAreSkipped() throws {
        let continued = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8) + Self.created
        #expect(try read([continued]) == [[.created]])
    }

    @Test func theRequestIsValidJSONWithTheTextAndLength() throws {
        let target = HTTPTarget(endpoint: HostPort(host: "127.0.0.1", port: 8080), token: "sp_abc.def", recipient: "be\"nch", device: HTTPTarget.benchDevice)
        let bytes = HTTPRequestTemplate.post(target, payloadSize: 100)
        let text = String(decoding: bytes, as: UTF8.self)
        let parts = text.components(separatedBy: "\r\n\r\n")
        #expect(parts.count == 2)
        #expect(parts[0].hasPrefix("POST /v1/messages HTTP/1.1\r\n"))
        #expect(parts[0].contains("\r\nAuthorization: Bearer sp_abc.def\r\n"))
        #expect(parts[0].contains("\r\nContent-Length: \(parts[1].utf8.count)"))
        #expect(parts[1].contains(#""recipient":"be\"nch""#))
    }
}
