import PushEventLoop
import PushTestSupport
import Synchronization
import Testing

extension EventLoopSuite {
    /// What HTTPServer refuses itself that evhttp lets through (RFC 9112), its cap per
    /// client address, and `Expect: 100-continue` decided by the owner before the body.
    @Suite struct HTTPRequestRulesTests {
        /// A request that hides a second one in what its second Content-Length calls its body.
        static let hidden = "POST /hidden HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
        static let smuggling = "POST /first HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: \(hidden.utf8.count)\r\n\r\n" + hidden

        @Test func twoContentLengthsAre400AndCloseSoTheHiddenRequestNeverRuns() throws {
            let server = try HTTPTestServer()
            defer { server.shutdown() }
            let client = try HTTPTestConnection(port: server.port, timeoutMs: 5_000)
            try client.send(Self.smuggling)
            let response = try client.readResponse()
            #expect(response.status == 400 && response.headers["connection"] == "close", "\(response.text)")
            #expect(response.text.contains("Content-Length"), "\(response.text)")
            #expect(client.waitForClose(), "closed after the 400")
            #expect(server.seen.withLock { $0 }.isEmpty, "the handler saw \(server.seen.withLock { $0 })")
            #expect(server.onLoop { http, _ in http.refusals(.duplicateContentLength) } == 1)
        }

        /// Each is answered 400 with `Connection: close`, the connection is closed, and the
        /// handler never sees it.
        @Test(arguments: [
            ("POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\nabc", HTTPRequestRefusal.invalidContentLength),
            ("POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 3\r\n\r\nabc", .duplicateContentLength),
            ("POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", .duplicateContentLength),
            ("GET /p HTTP/1.1\r\n\r\n", .missingHost),
            ("GET /p HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", .duplicateHost),
            ("GET /p HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a\r\nAuthorization: Bearer b\r\n\r\n", .duplicateAuthorization),
            ("POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n3\r\nabc\r\n0\r\n\r\n", .transferEncoding),
            ("POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", .transferEncoding),
            ("POST /p HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", .transferEncoding),
            ("GET /p HTTP/1.1\r\nHost: x\r\nX-Long: a\r\n b\r\n\r\n", .obsFold),
            ("POST /p HTTP/1.1\r\nHost: x\r\nContent-Length : 3\r\n\r\nabc", .invalidFieldName),
            // evhttp reads no body for HEAD: the "body" would be served as the next request.
            ("HEAD /p HTTP/1.1\r\nHost: x\r\nContent-Length: 27\r\n\r\nGET /y HTTP/1.1\r\nHost: x\r\n\r\n", .unreadBody),
        ])
        func headsRFC9112RefusesAre400AndClose(request: String, reason: HTTPRequestRefusal) throws {
            let server = try HTTPTestServer()
            defer { server.shutdown() }
            let client = try HTTPTestConnection(port: server.port, timeoutMs: 5_000)
            try client.send(request)
            let response = try client.readResponse()
            #expect(response.status == 400 && response.headers["connection"] == "close", "\(request.debugDescription): \(response.text)")
            // evhttp refuses some itself (a value it cannot read), with its own page.
            #expect(response.text == reason.detail + "\n" || response.text.contains("<HTML>"), "\(response.text)")
            #expect(client.waitForClose(), "\(request.debugDescription): closed after the 400")
            #expect(server.seenCount == 0, "\(request.debugDescription) reached the handler")
            #expect(server.onLoop { http, _ in http.refusals(reason) } == 1)
        }

        @Test func aRequestWithinTheRulesIsServedAndHTTP10NeedsNoHost() throws {
            let server = try HTTPTestServer()
            defer { server.shutdown() }
            for request in ["GET /p HTTP/1.0\r\n\r\n", "POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
                            "POST /p HTTP/1.1\r\nhost: x\r\nAuthorization: Bearer a\r\nContent-Length: 3\r\n\r\nabc"] {
                let response = try #require(try httpExchange(port: server.port, request))
                #expect(response.status == 200, "\(request.debugDescription): \(response.text)")
            }
            // Two requests in one write on a keep-alive connection: the second's head is read
            // from what followed the first.
            let client = try HTTPTestConnection(port: server.port, timeoutMs: 5_000)
            try client.send("POST /one HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\naGET /two HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try client.readResponse().text.contains("path=/one"))
            #expect(try client.readResponse().text.contains("path=/two"))
            try client.send("GET /three HTTP/1.1\r\n\r\n")
            #expect(try client.readResponse().status == 400, "the third has no Host")
        }

        @Test func oneAddressFillsItsCapAndAnotherIsStillServed() throws {
            let server = try HTTPTestServer(gate: HTTPConnectionGate(maxConnections: 20, maxPerAddress: 5))
            defer { server.shutdown() }
            let held = try (0..<5).map { _ in try HTTPTestConnection(port: server.port, timeoutMs: 5_000, source: "127.0.0.1") }
            for connection in held { try connection.send("GET") }
            #expect(waitUntil { server.gate.open(from: "127.0.0.1") == 5 })
            let refused = try HTTPTestConnection(port: server.port, timeoutMs: 5_000, source: "127.0.0.1").readResponse()
            #expect(refused.status == 503 && refused.headers["retry-after"] == "1")
            let other = try HTTPTestConnection(port: server.port, timeoutMs: 5_000, source: "127.0.0.2")
            try other.send("GET /other HTTP/1.1\r\nHost: x\r\n\r\n")
            let served = try other.readResponse()
            #expect(served.status == 200 && served.text.contains("peer=127.0.0.2"), "\(served.text)")
            #expect(server.onLoop { http, _ in http.refusedPerAddress } == 1)
            #expect(server.onLoop { http, _ in http.refusedAtCap } == 0)
            withExtendedLifetime(held) {}
        }

        /// A server whose owner lets a 100-continue request on only with `Authorization: Bearer good`.
        static func vettingServer(limits: HTTPServerLimits = HTTPServerLimits()) throws -> HTTPTestServer {
            let server = try HTTPTestServer(limits: limits)
            server.onLoop { http, loop in
                http.vetContinue = { pending in
                    // Decided a little later, as after a database read.
                    loop.schedule(after: .milliseconds(20)) {
                        if pending.head.header("authorization") == "Bearer good" && pending.head.path == "/v1/messages" {
                            pending.proceed()
                        } else {
                            pending.refuse(status: 401, reason: "Unauthorized", headers: [("Content-Type", "text/plain")],
                                           body: Array("no token\n".utf8))
                        }
                    }
                }
            }
            return server
        }

        @Test func expectContinueIsVettedBeforeTheBody() throws {
            var limits = HTTPServerLimits()
            limits.maxBodyBytes = 100
            let server = try Self.vettingServer(limits: limits)
            defer { server.shutdown() }

            let refused = try HTTPTestConnection(port: server.port, timeoutMs: 5_000)
            try refused.send("POST /v1/messages HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
            let answer = try refused.readResponse()
            #expect(answer.status == 401 && answer.text == "no token\n" && answer.headers["connection"] == "close", "\(answer.status)")
            #expect(refused.waitForClose(), "closed without the body")

            let large = try HTTPTestConnection(port: server.port, timeoutMs: 5_000)
            try large.send("POST /v1/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer good\r\nExpect: 100-continue\r\nContent-Length: 101\r\n\r\n")
            #expect(try large.readResponse().status == 413)

            let hostless = try HTTPTestConnection(port: server.port, timeoutMs: 5_000)
            try hostless.send("POST /v1/messages HTTP/1.1\r\nAuthorization: Bearer good\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
            #expect(try hostless.readResponse().status == 400, "the head's rules come before the owner")

            let good = try HTTPTestConnection(port: server.port, timeoutMs: 5_000)
            try good.send("POST /v1/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer good\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
            #expect(try good.readResponse().status == 100)
            try good.send("hello")
            let served = try good.readResponse()
            #expect(served.status == 200 && served.text.hasSuffix("body=hello"))
            #expect(server.seen.withLock { $0 } == ["post /v1/messages"])
        }
    }
}
