import Glibc
import PushClock
import PushEventLoop
import PushTestSupport
import Synchronization
import Testing

extension EventLoopSuite {
    @Suite struct HTTPServerTests {
        @Test func getAndPostReachTheHandlerWithHeadersAndBody() throws {
            let server = try HTTPTestServer()
            defer { server.shutdown() }
            let get = try #require(try httpExchange(port: server.port, "GET /v1/items%20x?a=1 HTTP/1.1\r\nHost: x\r\nX-Test: hello\r\n\r\n"))
            #expect(get.status == 200)
            #expect(get.headers["x-echo"] == "yes")
            #expect(get.text.contains("method=get\npath=/v1/items%20x\nquery=a=1\nx-test=hello\npeer=127.0.0.1\n"))
            let post = try #require(try httpExchange(
                port: server.port, "POST /v1/payloads HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"a\":\"bcd\"}"))
            #expect(post.status == 200)
            #expect(post.text.contains("method=post\npath=/v1/payloads\n"))
            #expect(post.text.hasSuffix("body={\"a\":\"bcd\"}"))
            // Unknown methods reach the handler too, which answers 405 itself.
            let other = try #require(try httpExchange(port: server.port, "BREW /pot HTTP/1.1\r\nHost: x\r\n\r\n"))
            #expect(other.text.contains("method=other\npath=/pot"))
            #expect(waitUntil { server.gate.open == 0 })
        }

        /// The store's SIGTERM rests on this: every request taken gets its answer, written
        /// whole, before the server is freed; keep-alive connections close after their answer.
        @Test func aDrainAnswersWhatItHoldsThenClosesEveryConnectionAndStopsAccepting() throws {
            let server = try HTTPTestServer { loop, request in
                guard request.path == "/slow" else { return echo(request) }
                loop.schedule(after: .milliseconds(300)) { request.respond(status: 201, headers: [], body: Array("done".utf8)) }
            }
            defer { server.shutdown() }
            let idle = try HTTPTestConnection(port: server.port, timeoutMs: 5_000)
            try idle.send("GET /first HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try idle.readResponse().headers["connection"] == nil, "keep-alive before the drain")
            let slow = try HTTPTestConnection(port: server.port, timeoutMs: 5_000)
            try slow.send("POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
            #expect(waitUntil { server.seenCount == 2 })
            let drained = Mutex(false)
            server.onLoop { http, _ in http.drain(within: .seconds(2)) { drained.withLock { $0 = true } } }

            // While a request is held, new connections are still served, each closed after its answer.
            let late = try #require(try httpExchange(port: server.port, "GET /late HTTP/1.1\r\nHost: x\r\n\r\n"))
            #expect(late.status == 200 && late.headers["connection"] == "close")
            #expect(!drained.withLock { $0 })
            let answer = try slow.readResponse()
            #expect(answer.status == 201 && answer.text == "done" && answer.headers["connection"] == "close")
            #expect(slow.waitForClose() && idle.waitForClose(), "the answered and the idle connections are closed")
            #expect(waitUntil { drained.withLock { $0 } })
            #expect(server.onLoop { http, _ in http.connectionCount } == 0)
            #expect((try? HTTPTestConnection(port: server.port, timeoutMs: 1_000)) == nil, "no longer accepting")
        }

        @Test func anIPv6ServerShowsTheNumericPeer() throws {
            let server = try HTTPTestServer(host: "::1")
            defer { server.shutdown() }
            let output = try runCurl(["-sg", "--max-time", "5", "http://[::1]:\(server.port)/six"])
            #expect(output.contains("path=/six\n"))
            #expect(output.contains("peer=::1\n"))
        }

        @Test func keepAliveServesTwoRequestsOnOneConnection() throws {
            let server = try HTTPTestServer()
            defer { server.shutdown() }
            let client = try HTTPTestConnection(port: server.port, timeoutMs: 5_000)
            try client.send("GET /one HTTP/1.1\r\nHost: x\r\n\r\n")
            let first = try #require((try? client.readResponse()))
            try client.send("POST /two HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
            let second = try #require((try? client.readResponse()))
            #expect(first.text.contains("path=/one"))
            #expect(second.text.contains("path=/two") && second.text.hasSuffix("body=abc"))
            #expect(server.onLoop { http, _ in http.connectionCount } == 1)
            #expect(server.gate.open == 1)
            // The loop shutting down stops the server, which gives the place back.
            server.shutdown()
            #expect(server.gate.open == 0)
            #expect(client.waitForClose())
        }

        @Test func aDeferredReplyArrivesWhenTheHandlerAnswers() throws {
            let server = try HTTPTestServer { loop, request in
                loop.schedule(after: .milliseconds(50)) {
                    request.respond(status: 201, reason: "Made", headers: [("Content-Type", "application/json")], body: Array("{}".utf8))
                }
            }
            defer { server.shutdown() }
            let start = Clocks.monotonicMilliseconds()
            let response = try #require(try httpExchange(port: server.port, "POST /later HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"))
            #expect(response.status == 201)
            #expect(response.text == "{}")
            #expect(milliseconds(since: start) >= 40)
        }

        /// evhttp does not read while its request waits for an answer: the connection goes
        /// when the late answer cannot be delivered (or finds the client gone at the next read).
        @Test func aClientGoneBeforeADeferredReplyFreesItsConnection() throws {
            let answered = Mutex(false)
            let server = try HTTPTestServer { loop, request in
                loop.schedule(after: .milliseconds(200)) {
                    request.respond(status: 200, headers: [], body: Array("late".utf8))
                    #expect(request.isAnswered)
                    request.respond(status: 500, headers: [], body: [])  // ignored
                    answered.withLock { $0 = true }
                }
            }
            defer { server.shutdown() }
            do {
                let client = try HTTPTestConnection(port: server.port, timeoutMs: 5_000)
                try client.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(waitUntil { server.seenCount == 1 })
                #expect(server.gate.open == 1)
            }
            #expect(waitUntil { answered.withLock { $0 } })
            #expect(waitUntil { server.gate.open == 0 })
            #expect(server.onLoop { http, _ in http.connectionCount } == 0)
            // Still serving.
            #expect(try httpExchange(port: server.port, "GET /after HTTP/1.1\r\nHost: x\r\n\r\n")?.status == 200)
        }

        /// A request the handler lets go of unanswered answers 500 itself, so its
        /// connection does not wait for ever.
        @Test func aRequestDroppedUnansweredGets500() throws {
            let server = try HTTPTestServer { _, _ in }
            defer { server.shutdown() }
            let response = try #require(try httpExchange(port: server.port, "GET /dropped HTTP/1.1\r\nHost: x\r\n\r\n"))
            #expect(response.status == 500)
            #expect(waitUntil { server.gate.open == 0 })
        }

        @Test func aBodyOverTheLimitGets413WithoutTheHandler() throws {
            let server = try HTTPTestServer(limits: HTTPServerLimits(maxBodyBytes: 1024))
            defer { server.shutdown() }
            let body = String(repeating: "a", count: 2000)
            let response = try #require(try httpExchange(
                port: server.port, "POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.count)\r\n\r\n\(body)"))
            #expect(response.status == 413)
            #expect(server.seenCount == 0)
            #expect(waitUntil { server.gate.open == 0 })
        }

        @Test func aHeadOverTheLimitGetsA4xxWithoutTheHandler() throws {
            let server = try HTTPTestServer(limits: HTTPServerLimits(maxHeaderBytes: 1024))
            defer { server.shutdown() }
            let filler = String(repeating: "b", count: 2000)
            let response = try #require(try httpExchange(port: server.port, "GET /h HTTP/1.1\r\nHost: x\r\nX-Filler: \(filler)\r\n\r\n"))
            // evhttp 2.1 answers an oversized head 400 itself (not 431).
            #expect(response.status == 400, "status \(response.status)")
            #expect(server.seenCount == 0)
        }

        @Test func aMalformedRequestLineGets400() throws {
            let server = try HTTPTestServer()
            defer { server.shutdown() }
            let response = try #require(try httpExchange(port: server.port, "GET\r\n\r\n"))
            #expect(response.status == 400)
            #expect(server.seenCount == 0)
        }

        @Test func aSlowClientIsClosedAtTheDeadline() throws {
            let server = try HTTPTestServer(limits: HTTPServerLimits(requestDeadline: .milliseconds(300)))
            defer { server.shutdown() }
            let client = try HTTPTestConnection(port: server.port, timeoutMs: 5_000)
            let start = Clocks.monotonicMilliseconds()
            let request = Array("GET /slow HTTP/1.1\r\nHost: x\r\nX-Long: \(String(repeating: "c", count: 100))\r\n\r\n".utf8)
            let closed = Atomic(false)
            let reader = TestThread { [client] in
                closed.store(client.waitForClose(), ordering: .relaxed)
            }
            for byte in request {
                try client.send([byte])
                // The trickle is what is under test: a byte every 20 ms never completes the
                // head before the 300 ms deadline.
                usleep(20_000)
                if closed.load(ordering: .relaxed) { break }
            }
            reader.join()
            let elapsed = milliseconds(since: start)
            let wasClosed = closed.load(ordering: .relaxed)
            #expect(wasClosed)
            #expect(elapsed >= 250 && elapsed < 2000, "closed after \(elapsed) ms")
            #expect(server.seenCount == 0)
            #expect(server.onLoop { http, _ in http.closedAtDeadline } == 1)
            #expect(waitUntil { server.gate.open == 0 })
        }

        @Test func overTheCapAConnectionGets503UntilAPlaceFrees() throws {
            let gate = HTTPConnectionGate(maxConnections: 2)
            let server = try HTTPTestServer(gate: gate)
            defer { server.shutdown() }
            var first: HTTPTestConnection? = try HTTPTestConnection(port: server.port, timeoutMs: 5_000)
            let second = try HTTPTestConnection(port: server.port, timeoutMs: 5_000)
            for client in [first!, second] {
                try client.send("GET /held HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect((try? client.readResponse())?.status == 200)
            }
            #expect(gate.open == 2)
            let third = try HTTPTestConnection(port: server.port, timeoutMs: 5_000)
            try third.send("GET /refused HTTP/1.1\r\nHost: x\r\n\r\n")
            let refused = try #require((try? third.readResponse()))
            #expect(refused.status == 503)
            #expect(refused.headers["content-type"] == "application/problem+json")
            #expect(refused.headers["retry-after"] == "1")
            #expect(refused.headers["connection"] == "close")
            #expect(refused.text.contains("\"BUSY\""))
            #expect(third.waitForClose())
            #expect(server.onLoop { http, _ in http.refusedAtCap } == 1)
            #expect(server.seenCount == 2)

            first = nil
            #expect(waitUntil { gate.open == 1 })
            #expect(try httpExchange(port: server.port, "GET /again HTTP/1.1\r\nHost: x\r\n\r\n")?.status == 200)
            #expect(server.onLoop { http, _ in http.connectionCount } <= 2)
        }

        @Test func aRequestOverTLS() throws {
            let directory = try TemporaryDirectory()
            let certificate = directory.path + "/cert.pem"
            let key = directory.path + "/key.pem"
            try SelfSignedCertificate.write(commonName: "localhost", subjectAltNames: ["IP:127.0.0.1"],
                                            certificatePath: certificate, privateKeyPath: key)
            let tls = try TLSContext.server(certificateFile: certificate, privateKeyFile: key)
            let server = try HTTPTestServer(tls: tls)
            defer { server.shutdown() }
            let output = try runCurl(["-sk", "--max-time", "5", "-X", "POST", "-H", "X-Test: tls", "--data-binary", "secret",
                                      "https://127.0.0.1:\(server.port)/v1/tls"])
            #expect(output.contains("method=post\npath=/v1/tls\n"))
            #expect(output.contains("x-test=tls"))
            #expect(output.hasSuffix("body=secret"))
            // A plain HTTP client on the TLS port gets no answer, and its connection goes.
            let plain = try HTTPTestConnection(port: server.port, timeoutMs: 5_000)
            try plain.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect((try? plain.readResponse()) == nil)
            #expect(waitUntil { server.gate.open == 0 })
        }

        @Test func overTheCapATLSConnectionIsClosed() throws {
            let directory = try TemporaryDirectory()
            let certificate = directory.path + "/cert.pem"
            let key = directory.path + "/key.pem"
            try SelfSignedCertificate.write(commonName: "localhost", subjectAltNames: ["IP:127.0.0.1"],
                                            certificatePath: certificate, privateKeyPath: key)
            let tls = try TLSContext.server(certificateFile: certificate, privateKeyFile: key)
            let gate = HTTPConnectionGate(maxConnections: 1)
            let server = try HTTPTestServer(gate: gate, tls: tls)
            defer { server.shutdown() }
            // Holds the only place, its handshake never started.
            let holder = try HTTPTestConnection(port: server.port, timeoutMs: 5_000)
            #expect(waitUntil { gate.open == 1 })
            #expect(throws: (any Error).self) {
                try runCurl(["-sk", "--max-time", "5", "https://127.0.0.1:\(server.port)/"])
            }
            #expect(server.onLoop { http, _ in http.refusedAtCap } == 1)
            withExtendedLifetime(holder) {}
        }

        @Test func twoServersOnTwoLoopsShareTheSockets() throws {
            let first = try HTTPTestServer { _, request in
                request.respond(status: 200, headers: [], body: Array("first".utf8))
            }
            defer { first.shutdown() }
            let shared = first.onLoop { http, _ in try? http.sharedSockets() }
            let sockets = try #require(shared)
            let second = try HTTPTestServer(sharing: sockets) { _, request in
                request.respond(status: 200, headers: [], body: Array("second".utf8))
            }
            defer { second.shutdown() }
            #expect(second.port == first.port)
            var answers: Set<String> = []
            for _ in 0..<400 where answers.count < 2 {
                let response = try #require(try httpExchange(port: first.port, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
                answers.insert(response.text)
            }
            #expect(answers == ["first", "second"])
            // Stopping one leaves the other serving on the port.
            first.onLoop { http, _ in http.stop() }
            for _ in 0..<20 {
                #expect(try httpExchange(port: second.port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")?.text == "second")
            }
        }

        @Test func stopClosesOpenConnectionsAndGivesBackTheGate() throws {
            let held = Mutex(0)
            let server = try HTTPTestServer { _, request in
                if request.path == "/hold" {
                    held.withLock { $0 += 1 }  // never answered until stop
                    heldRequests.withLock { $0.append(UncheckedBox(request)) }
                } else {
                    echo(request)
                }
            }
            defer { server.shutdown() }
            let idle = try HTTPTestConnection(port: server.port, timeoutMs: 5_000)
            try idle.send("GET /first HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect((try? idle.readResponse())?.status == 200)
            let holding = try HTTPTestConnection(port: server.port, timeoutMs: 5_000)
            try holding.send("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(waitUntil { held.withLock { $0 } == 1 })
            #expect(server.gate.open == 2)
            let port = server.onLoop { http, _ in
                http.stop()
                http.stop()
                return http.port
            }
            #expect(port == 0)
            #expect(server.gate.open == 0)
            #expect(server.onLoop { http, _ in http.connectionCount } == 0)
            #expect(idle.waitForClose())
            #expect(holding.waitForClose())
            // The held request's answer after stop does nothing.
            _ = server.onLoop { _, _ in
                for box in heldRequests.withLock({ $0 }) {
                    box.value.respond(status: 200, headers: [], body: [])
                }
                heldRequests.withLock { $0 = [] }
                return true
            }
        }
    }
}

/// Requests a test keeps unanswered; touched only on the server's loop thread.
private let heldRequests = Mutex<[UncheckedBox<HTTPServerRequest>]>([])

private struct UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

final class TemporaryDirectory {
    let path: String
    init() throws {
        var template = Array("/tmp/http-tests-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw EventLoopError.system(operation: "mkdtemp", errno: errno) }
        path = String(cString: made)
    }
    deinit {
        for name in ["cert.pem", "key.pem"] { unlink(path + "/" + name) }
        rmdir(path)
    }
}

/// curl's standard output; fails unless it exits 0.
func runCurl(_ arguments: [String]) throws -> String {
    var pipeFDs: [Int32] = [0, 0]
    guard pipe(&pipeFDs) == 0 else { throw EventLoopError.system(operation: "pipe", errno: errno) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, pipeFDs[1], 1)
    posix_spawn_file_actions_addclose(&actions, pipeFDs[0])
    let argv = (["curl"] + arguments).map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var pid: pid_t = 0
    let spawned = posix_spawnp(&pid, "curl", &actions, nil, argv, environ)
    Glibc.close(pipeFDs[1])
    guard spawned == 0 else {
        Glibc.close(pipeFDs[0])
        throw EventLoopError.system(operation: "spawn curl", errno: spawned)
    }
    var output: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = read(pipeFDs[0], &chunk, chunk.count)
        if count <= 0 { break }
        output += chunk[..<count]
    }
    Glibc.close(pipeFDs[0])
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    guard status == 0 else { throw EventLoopError.system(operation: "curl exited with \(status)", errno: 0) }
    return String(decoding: output, as: UTF8.self)
}
