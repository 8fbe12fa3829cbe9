import PushEventLoop
import PushTestSupport
import Testing

extension EventLoopSuite {
    /// HTTPServer swapping evhttp's own HTML error pages for `HTTPErrorPages`.
    @Suite struct HTTPErrorPagesTests {
        static let pages = HTTPErrorPages(contentType: "text/x-test") { status, reason, _ in Array("page \(status) \(reason)".utf8) }

        @Test func evhttpsOwnRefusalsGetThePages() throws {
            var limits = HTTPServerLimits()
            limits.maxBodyBytes = 16
            let server = try HTTPTestServer(limits: limits, errorPages: Self.pages)
            defer { server.shutdown() }
            for (request, status) in [("garbage\r\n\r\n", 400),
                                      ("POST /p HTTP/1.1\r\nContent-Length: 17\r\n\r\n", 413),
                                      ("POST /p HTTP/1.0\r\nContent-Length: 17\r\n\r\n", 413)] {
                let response = try #require(try httpExchange(port: server.port, request), "\(request.debugDescription)")
                #expect(response.status == status, "\(request.debugDescription)")
                #expect(response.headers["content-type"] == "text/x-test" && response.headers["connection"] == "close")
                #expect(response.text.hasPrefix("page \(status) "), "\(response.text)")
            }
            #expect(server.seenCount == 0)
        }

        @Test func theHandlersOwnErrorsAndHTMLAreLeftAlone() throws {
            let server = try HTTPTestServer(errorPages: Self.pages) { _, request in
                request.respond(status: 404, headers: [("Content-Type", "text/html")], body: Array("<p>mine</p>".utf8))
            }
            defer { server.shutdown() }
            let response = try #require(try httpExchange(port: server.port, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n"))
            #expect(response.status == 404 && response.headers["content-type"] == "text/html" && response.text == "<p>mine</p>")
        }

        @Test func theCapsRefusalGetsThePage() throws {
            let server = try HTTPTestServer(gate: HTTPConnectionGate(maxConnections: 1), errorPages: Self.pages)
            defer { server.shutdown() }
            let held = try HTTPTestConnection(port: server.port, timeoutMs: 5_000)
            try withExtendedLifetime(held) {
                let refused = try HTTPTestConnection(port: server.port, timeoutMs: 5_000).readResponse()
                #expect(refused.status == 503 && refused.headers["content-type"] == "text/x-test")
                #expect(refused.text == "page 503 Service Unavailable" && refused.headers["retry-after"] == "1")
            }
        }

        @Test func overTLSToo() throws {
            let directory = try TemporaryDirectory()
            let certificate = directory.path + "/cert.pem"
            let key = directory.path + "/key.pem"
            try SelfSignedCertificate.write(commonName: "localhost", subjectAltNames: ["IP:127.0.0.1"],
                                            certificatePath: certificate, privateKeyPath: key)
            var limits = HTTPServerLimits()
            limits.maxBodyBytes = 16
            let server = try HTTPTestServer(limits: limits, tls: try TLSContext.server(certificateFile: certificate, privateKeyFile: key),
                                            errorPages: Self.pages)
            defer { server.shutdown() }
            let output = try runCurl(["-sk", "-i", "--max-time", "5", "--data-binary", String(repeating: "b", count: 17),
                                      "https://127.0.0.1:\(server.port)/p"])
            #expect(output.hasPrefix("HTTP/1.1 413 "), "\(output)")
            #expect(output.lowercased().contains("content-type: text/x-test") && output.hasSuffix("page 413 Request Entity Too Large"),
                    "\(output)")
        }
    }
}
