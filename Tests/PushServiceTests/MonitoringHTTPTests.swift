import Glibc
import PushEventLoop
import PushService
import PushTestSupport
import Synchronization
import Testing

/// A MonitoringEndpoint on its own loop thread, with `up_checks_total 1` in its registry.
private final class MonitorUnderTest: Sendable {
    let thread: EventLoopThread
    let port: Int

    init(limits: HTTPServerLimits = MonitoringEndpoint.defaultLimits,
         maxConnections: Int = MonitoringEndpoint.defaultMaxConnections) throws {
        let bound = Mutex(0)
        thread = try EventLoopThread(name: "monitor-http-test") { loop in
            let registry = MetricsRegistry()
            registry.counter("up_checks_total", help: "Checks.") { 1 }
            let endpoint = try? MonitoringEndpoint(loop: loop, host: "127.0.0.1", port: 0, metrics: registry,
                                                   limits: limits, maxConnections: maxConnections) { .ready }
            bound.withLock { $0 = endpoint?.port ?? 0 }
        }
        port = bound.withLock { $0 }
        try #require(port > 0)
    }

    deinit { thread.shutdown() }

    func connect() throws -> HTTPTestConnection {
        try HTTPTestConnection(port: port, timeoutMs: 5_000)
    }

    /// Sends `request` (in `pieces` writes) on a new connection and reads one response,
    /// then checks that the server closes the connection after it.
    func exchange(_ request: String, in pieces: Int = 1) throws -> HTTPTestResponse {
        let client = try connect()
        let bytes = Array(request.utf8)
        let size = max(1, (bytes.count + pieces - 1) / pieces)
        for start in stride(from: 0, to: bytes.count, by: size) {
            try client.send(Array(bytes[start ..< min(start + size, bytes.count)]))
        }
        let response = try client.readResponse()
        #expect(client.waitForClose(), "the connection stays open after the response to \(request.debugDescription)")
        return response
    }
}

@Suite("Monitoring endpoint over HTTP", .ownThread, .serialized)
struct MonitoringHTTPTests {
    @Test("GET /metrics is 200 with the text format's type, its length and Connection: close, then closed, even when the client asks to keep it")
    func getMetrics() throws {
        let monitor = try MonitorUnderTest()
        for extra in ["", "Connection: keep-alive\r\n"] {
            let response = try monitor.exchange("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: */*\r\n\(extra)\r\n")
            #expect(response.status == 200)
            #expect(response.headers["content-type"] == MetricsRegistry.contentType)
            #expect(response.headers["content-length"] == "\(response.body.count)")
            #expect(response.headers["connection"] == "close")
            #expect(try MetricsExposition(parsing: response.text).value("up_checks_total") == 1)
        }
    }

    @Test("the query is not part of the path; HTTP/1.0, LF-only lines and a request in pieces are served")
    func lenientButExact() throws {
        let monitor = try MonitorUnderTest()
        #expect(try monitor.exchange("GET /healthz?verbose=1 HTTP/1.1\r\nHost: x\r\n\r\n").text == "ok\n")
        let old = try monitor.exchange("GET /healthz HTTP/1.0\nHost: x\n\n")
        #expect(old.text == "ok\n" && old.headers["content-length"] == "3", "\(old)")
        let pieces = try monitor.exchange("GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", in: 7)
        #expect(pieces.status == 200 && pieces.text == "ready\n")
        #expect(pieces.headers["content-type"] == "text/plain; charset=utf-8")
    }

    @Test("an unknown path is 404 in plain text")
    func notFound() throws {
        let monitor = try MonitorUnderTest()
        let response = try monitor.exchange("GET /nothing-here HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(response.status == 404)
        #expect(response.headers["content-type"] == "text/plain; charset=utf-8")
        #expect(response.text == "not found\n")
    }

    @Test("a method other than GET is 405 with Allow: GET; HEAD gets the head without a body")
    func methodNotAllowed() throws {
        let monitor = try MonitorUnderTest()
        for method in ["POST", "PUT", "DELETE", "HEAD", "OPTIONS", "BREW"] {
            let response = try monitor.exchange("\(method) /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
            #expect(response.status == 405, "\(method)")
            #expect(response.headers["allow"] == "GET", "\(method)")
            #expect(response.text == (method == "HEAD" ? "" : "method not allowed\n"), "\(method)")
        }
    }

    /// evhttp answers these itself: 400, its HTML page replaced by plain text.
    @Test("a head over 8 KiB is refused with 400 without waiting for its end")
    func oversizeHead() throws {
        let monitor = try MonitorUnderTest()
        let filler = String(repeating: "a", count: 9_000)
        #expect(try monitor.exchange("GET /metrics HTTP/1.1\r\nX-Filler: \(filler)").status == 400)
    }

    @Test("what is not an HTTP/1.x request is 400", arguments: [
        "garbage\r\n\r\n",
        "\u{1}\u{2}\u{3}\r\n\r\n",
        "GET /metrics\r\n\r\n",
        "GET /metrics HTTP/2.0\r\n\r\n",
        "GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n",
        "\r\n\r\n",
    ])
    func malformed(request: String) throws {
        let monitor = try MonitorUnderTest()
        let response = try monitor.exchange(request)
        #expect(response.status == 400, "\(request.debugDescription)")
        #expect(response.headers["content-type"] == "text/plain; charset=utf-8" && response.text == "bad request\n",
                "\(request.debugDescription): \(response.text)")
    }

    /// evhttp passes these on rather than answering 400; the path decides, and serves none.
    /// A header without a name, which evhttp ignores, and a 1.1 request without Host are
    /// refused by the server itself (RFC 9112 5.1, 3.2).
    @Test("a target without its slash or after two spaces is an unknown path; a header without a name, or no Host on 1.1, is 400")
    func whatEvhttpAccepts() throws {
        let monitor = try MonitorUnderTest()
        #expect(try monitor.exchange("GET metrics HTTP/1.1\r\nHost: x\r\n\r\n").status == 404)
        #expect(try monitor.exchange("GET  /metrics HTTP/1.1\r\nHost: x\r\n\r\n").status == 404)
        let nameless = try monitor.exchange("GET /healthz HTTP/1.1\r\nHost: x\r\n: no name\r\n\r\n")
        #expect(nameless.status == 400 && nameless.text.contains("header name"), "\(nameless.text)")
        let hostless = try monitor.exchange("GET /healthz HTTP/1.1\r\n\r\n")
        #expect(hostless.status == 400 && hostless.text.contains("Host"), "\(hostless.text)")
        #expect(try monitor.exchange("GET /healthz HTTP/1.0\r\n\r\n").text == "ok\n")
    }

    @Test("a connection that sends no whole request within the deadline is closed")
    func slowClientsAreClosed() throws {
        var limits = MonitoringEndpoint.defaultLimits
        limits.requestDeadline = .milliseconds(100)
        let monitor = try MonitorUnderTest(limits: limits)
        let silent = try monitor.connect()
        #expect(silent.waitForClose())
        let partial = try monitor.connect()
        try partial.send("GET /metrics HTTP/1.1\r\n")
        #expect(partial.waitForClose())
    }

    @Test("over the connection cap a connection is answered 503 and closed; a place given back serves again")
    func connectionCap() throws {
        let monitor = try MonitorUnderTest(maxConnections: 2)
        do {
            let held = [try monitor.connect(), try monitor.connect()]
            try withExtendedLifetime(held) {
                // Accepted in order behind the two: the 503 comes without a request.
                let third = try monitor.connect()
                let refused = try third.readResponse()
                #expect(refused.status == 503)
                #expect(refused.headers["connection"] == "close")
                #expect(refused.headers["content-type"] == "text/plain; charset=utf-8" && refused.headers["retry-after"] == "1")
                #expect(third.waitForClose())
            }
        }
        // The two held connections are closed now.
        #expect(waitUntil { (try? monitor.exchange("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))?.status == 200 })
    }
}
