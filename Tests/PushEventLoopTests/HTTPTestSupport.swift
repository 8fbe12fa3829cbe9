import Dispatch
import Glibc
import PushClock
import PushEventLoop
import PushTestSupport
import Synchronization

/// An HTTPServer on a loop thread of its own, for the HTTP server tests.
/// `@unchecked Sendable`: `server` is touched only on the loop thread (`onLoop`).
final class HTTPTestServer: @unchecked Sendable {
    let thread: EventLoopThread
    let gate: HTTPConnectionGate
    private(set) var port = 0
    private var server: HTTPServer?
    /// What the handler saw: "METHOD path".
    let seen = Mutex<[String]>([])

    init(
        limits: HTTPServerLimits = HTTPServerLimits(), gate: HTTPConnectionGate = HTTPConnectionGate(maxConnections: 100),
        tls: TLSContext? = nil, host: String = "127.0.0.1", sharing: SharedListenSockets? = nil, errorPages: HTTPErrorPages? = nil,
        handler: @escaping @Sendable (EventLoop, HTTPServerRequest) -> Void = { _, request in echo(request) }
    ) throws {
        self.gate = gate
        let failure = Mutex<EventLoopError?>(nil)
        thread = try EventLoopThread(name: "http-test") { _ in }
        let done = DispatchSemaphore(value: 0)
        thread.handle.executeWithLoop { [self] loop in
            do throws(EventLoopError) {
                let handle: (HTTPServerRequest) -> Void = { [self] request in
                    seen.withLock { $0.append("\(request.method) \(request.path)") }
                    handler(loop, request)
                }
                let made = if let sharing {
                    try HTTPServer(loop: loop, sharing: sharing, limits: limits, gate: gate, errorPages: errorPages, handle: handle)
                } else {
                    try HTTPServer(loop: loop, host: host, port: 0, tls: tls, limits: limits, gate: gate, errorPages: errorPages,
                                   handle: handle)
                }
                server = made
                port = made.port
            } catch {
                failure.withLock { $0 = error }
            }
            done.signal()
        }
        done.wait()
        if let error = failure.withLock({ $0 }) { throw error }
    }

    /// Runs `body` on the loop with the server and waits for its result.
    func onLoop<T: Sendable>(_ body: @escaping @Sendable (HTTPServer, EventLoop) -> T) -> T {
        let result = Mutex<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        thread.handle.executeWithLoop { [self] loop in
            if let server { result.withLock { $0 = body(server, loop) } }
            done.signal()
        }
        done.wait()
        guard let value = result.withLock({ $0 }) else { fatalError("the test server is gone") }
        return value
    }

    var seenCount: Int { seen.withLock { $0.count } }

    func shutdown() {
        thread.shutdown()
    }
}

/// Answers 200 with what the request carried, one field a line.
func echo(_ request: HTTPServerRequest) {
    let text = "method=\(request.method)\npath=\(request.path)\nquery=\(request.query ?? "")\n"
        + "x-test=\(request.header("x-TEST") ?? "")\npeer=\(request.peerHost)\nbody=\(String(decoding: request.body, as: UTF8.self))"
    request.respond(status: 200, headers: [("Content-Type", "text/plain"), ("X-Echo", "yes")], body: Array(text.utf8))
}

/// One request on a connection of its own.
func httpExchange(port: Int, _ request: String) throws -> HTTPTestResponse? {
    let client = try HTTPTestConnection(port: port, timeoutMs: 5_000)
    try client.send(request)
    return try? client.readResponse()
}

func milliseconds(since start: Int64) -> Int64 { Clocks.monotonicMilliseconds() - start }
