import Foundation
import PushTestSupport
import Testing

/// What evhttp answers itself (it never reaches the handler) comes out in the endpoint's own
/// format: problem documents on the store's HTTP API, plain text on its monitoring endpoint.
@Suite("evhttp's own answers in the endpoints' formats, as a process", .ownThread, .serialized)
struct HTTPErrorPageProcessTests {
    final class Store {
        let deployment: TemporaryDeployment
        let service: ServiceProcess

        init() throws {
            deployment = try TemporaryDeployment()
            service = try ServiceProcess(["store", "--data-dir", deployment.directory, "--http", "127.0.0.1:0",
                                          "--metrics", "127.0.0.1:0"])
        }

        deinit { _ = service.terminate() }

        /// Sends `request` as raw bytes on a new connection; one response, then the close.
        func exchange(_ request: String, port: Int) throws -> HTTPTestResponse {
            let connection = try HTTPTestConnection(port: port, timeoutMs: 5_000)
            try connection.send(request)
            let response = try connection.readResponse()
            #expect(connection.waitForClose(), "still open after \(request.prefix(60).debugDescription)")
            return response
        }
    }

    static let apiCases: [(request: String, status: Int, code: String)] = [
        ("garbage\r\n\r\n", 400, "BAD_REQUEST"),
        ("GET /v1/messages HTTP/2.0\r\n\r\n", 400, "BAD_REQUEST"),
        ("GET /v1/messages/x HTTP/1.1\r\nX-Filler: \(String(repeating: "f", count: 9_000))\r\n\r\n", 400, "BAD_REQUEST"),
        ("POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n", 413, "TOO_LARGE"),
        ("POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n10000000\r\n",
         413, "TOO_LARGE"),
        ("POST /v1/messages HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 100000000\r\n\r\n", 413, "TOO_LARGE"),
        ("POST /v1/messages HTTP/1.1\r\nHost: x\r\nExpect: tea\r\nContent-Length: 2\r\n\r\n{}", 417, "BAD_REQUEST"),
    ]

    @Test("the HTTP API answers what evhttp refuses (bad request line, HTTP/2.0, head over 8 KiB, body over the limit by length or chunk, Expect) as problem+json")
    func apiAnswersProblems() throws {
        let store = try Store()
        let port = try #require(store.service.announcedHTTPPort)
        for (request, status, code) in Self.apiCases {
            let response = try store.exchange(request, port: port)
            let what = "\(request.prefix(60).debugDescription): \(response.status) \(response.text)"
            #expect(response.status == status, "\(what)")
            #expect(response.headers["content-type"] == "application/problem+json", "\(what)")
            #expect(response.headers["content-length"] == "\(response.body.count)", "\(what)")
            #expect(response.headers["connection"] == "close", "\(what)")
            let document = try response.json()
            #expect(document["status"] as? Int == status && document["code"] as? String == code, "\(what)")
        }
    }

    /// The 100 Continue comes once the token has been checked (a request without one gets
    /// its 401 instead: `HTTPEdgeProcessTests`).
    @Test("after evhttp's own 100 Continue, a chunk over the body limit is answered 413 as problem+json")
    func afterContinue() throws {
        let store = try Store()
        let token = try SecurePushBinary.run(["provider", "token", "create", "billing", "--data-dir", store.deployment.directory])
            .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let connection = try HTTPTestConnection(port: try #require(store.service.announcedHTTPPort), timeoutMs: 5_000)
        try connection.send("POST /v1/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\nExpect: 100-continue\r\n"
                            + "Transfer-Encoding: chunked\r\n\r\n")
        #expect(try connection.readResponse().status == 100)
        try connection.send("10000000\r\n")
        let refused = try connection.readResponse()
        #expect(refused.status == 413 && refused.headers["content-type"] == "application/problem+json", "\(refused.headers) \(refused.text)")
        #expect(try refused.json()["code"] as? String == "TOO_LARGE")
    }

    @Test("the monitoring endpoint answers what evhttp refuses in plain text")
    func monitoringAnswersPlainText() throws {
        let store = try Store()
        let port = try #require(store.service.announcedMetricsPort)
        let malformed = try store.exchange("garbage\r\n\r\n", port: port)
        #expect(malformed.status == 400 && malformed.text == "bad request\n", "\(malformed.text)")
        #expect(malformed.headers["content-type"] == "text/plain; charset=utf-8")
        let large = try store.exchange("POST /metrics HTTP/1.1\r\nContent-Length: 100000\r\n\r\n", port: port)
        #expect(large.status == 413 && large.headers["content-type"] == "text/plain; charset=utf-8", "\(large.text)")
    }
}
