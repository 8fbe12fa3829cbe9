import Dispatch
import Glibc
import PushClock
import PushEventLoop
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
        tls: TLSContext? = nil, host: String = "127.0.0.1", sharing: SharedListenSockets? = nil,
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
                    try HTTPServer(loop: loop, sharing: sharing, limits: limits, gate: gate, handle: handle)
                } else {
                    try HTTPServer(loop: loop, host: host, port: 0, tls: tls, limits: limits, gate: gate, handle: handle)
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

struct HTTPTestResponse {
    var status: Int
    var headers: [String: String]
    var body: String
}

/// A blocking client socket on 127.0.0.1 with a 5 s receive timeout.
/// `@unchecked Sendable`: a test reads on one thread while it writes on another.
final class HTTPTestClient: @unchecked Sendable {
    let fd: Int32
    private var buffered: [UInt8] = []

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw EventLoopError.system(operation: "socket", errno: errno) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            let code = errno
            Glibc.close(fd)
            throw EventLoopError.system(operation: "connect", errno: code)
        }
    }

    deinit { Glibc.close(fd) }

    func send(_ text: String) { send(Array(text.utf8)) }

    func send(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { return }
            offset += sent
        }
    }

    /// One response (head, then Content-Length bytes of body); nil on EOF or timeout first.
    func readResponse() -> HTTPTestResponse? {
        while true {
            if let end = headEnd() {
                let head = String(decoding: buffered[..<end], as: UTF8.self)
                var lines = head.split(separator: "\r\n" as Character).map(String.init)
                guard !lines.isEmpty else { return nil }
                let statusLine = lines.removeFirst().split(separator: " ")
                guard statusLine.count >= 2, let status = Int(statusLine[1]) else { return nil }
                var headers: [String: String] = [:]
                for line in lines {
                    guard let colon = line.firstIndex(of: ":") else { continue }
                    headers[line[..<colon].lowercased()] = String(line[line.index(after: colon)...].drop { $0 == " " })
                }
                let length = Int(headers["content-length"] ?? "0") ?? 0
                while buffered.count < end + 4 + length {
                    guard fill() else { return nil }
                }
                let body = String(decoding: buffered[(end + 4)..<(end + 4 + length)], as: UTF8.self)
                buffered.removeFirst(end + 4 + length)
                return HTTPTestResponse(status: status, headers: headers, body: body)
            }
            guard fill() else { return nil }
        }
    }

    /// Reads until the server closes (true) or the timeout (false).
    func waitForClose() -> Bool {
        while true {
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = recv(fd, &chunk, chunk.count, 0)
            if count == 0 { return true }
            if count < 0 { return errno == ECONNRESET }
            buffered += chunk[..<count]
        }
    }

    private func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        let count = recv(fd, &chunk, chunk.count, 0)
        guard count > 0 else { return false }
        buffered += chunk[..<count]
        return true
    }

    private func headEnd() -> Int? {
        guard buffered.count >= 4 else { return nil }
        for index in 0...(buffered.count - 4)
        where buffered[index] == 13 && buffered[index + 1] == 10 && buffered[index + 2] == 13 && buffered[index + 3] == 10 {
            return index
        }
        return nil
    }
}

/// One request on a connection of its own.
func httpExchange(port: Int, _ request: String) throws -> HTTPTestResponse? {
    let client = try HTTPTestClient(port: port)
    client.send(request)
    return client.readResponse()
}

func milliseconds(since start: Int64) -> Int64 { Clocks.monotonicMilliseconds() - start }
