import Glibc
import PushEventLoop
import PushService
import Synchronization
import Testing

/// An HTTPEndpoint on its own loop thread, answering /metrics and /empty.
private final class RunningEndpoint {
    let thread: EventLoopThread
    let port: Int

    init(idleTimeout: Duration = .seconds(5)) throws {
        let bound = Mutex(0)
        thread = try EventLoopThread(name: "http-test") { loop in
            let endpoint = try? HTTPEndpoint(loop: loop, host: "127.0.0.1", port: 0, idleTimeout: idleTimeout) { path in
                switch path {
                case "/metrics": (200, "text/plain; version=0.0.4", Array("up 1\n".utf8))
                case "/empty": (204, "text/plain", [])
                default: nil
                }
            }
            bound.withLock { $0 = endpoint?.port ?? 0 }
        }
        port = bound.withLock { $0 }
        #expect(port > 0)
    }

    deinit { thread.shutdown() }

    /// Sends `request` on a new connection and reads until the server closes it.
    func exchange(_ request: [UInt8], in pieces: Int = 1) throws -> String {
        let client = try BlockingSocket(port: port)
        let size = max(1, (request.count + pieces - 1) / pieces)
        for start in stride(from: 0, to: request.count, by: size) {
            client.send(request[start ..< min(start + size, request.count)])
        }
        return client.readToEnd()
    }

    func exchange(_ request: String, in pieces: Int = 1) throws -> String {
        try exchange(Array(request.utf8), in: pieces)
    }
}

/// A blocking client socket on 127.0.0.1 whose reads give up after 5 seconds.
private final class BlockingSocket {
    let fd: Int32
    private(set) var timedOut = false

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port)).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        #expect(fd >= 0 && connected == 0)
    }

    deinit { close(fd) }

    func send(_ bytes: ArraySlice<UInt8>) {
        let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        #expect(sent == bytes.count)
    }

    /// Everything until EOF; records a failure if the server neither answers nor closes.
    func readToEnd() -> String {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                received += buffer[..<count]
                continue
            }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                timedOut = true
                Issue.record("the server neither answered nor closed within 5 seconds")
            }
            return String(decoding: received, as: UTF8.self)
        }
    }
}

private func statusLine(_ response: String) -> String {
    // "\r\n" is one Character.
    String(response.prefix { !$0.isNewline })
}

private func body(_ response: String) -> String {
    let bytes = Array(response.utf8)
    let separator = Array("\r\n\r\n".utf8)
    for start in bytes.indices where bytes[start...].starts(with: separator) {
        return String(decoding: bytes[(start + separator.count)...], as: UTF8.self)
    }
    return ""
}

@Suite("HTTP endpoint", .serialized)
struct HTTPEndpointTests {
    @Test("GET of a known path is answered with its status, type, length and body, then closed")
    func getOK() throws {
        let server = try RunningEndpoint()
        let response = try server.exchange("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: */*\r\n\r\n")
        #expect(statusLine(response) == "HTTP/1.1 200 OK")
        #expect(response.contains("\r\nContent-Type: text/plain; version=0.0.4\r\n"))
        #expect(response.contains("\r\nContent-Length: 5\r\n"))
        #expect(response.contains("\r\nConnection: close\r\n"))
        #expect(body(response) == "up 1\n")
    }

    @Test("the query is not part of the path; LF-only lines and a request in pieces are fine")
    func lenientButExact() throws {
        let server = try RunningEndpoint()
        #expect(statusLine(try server.exchange("GET /metrics?debug=1 HTTP/1.1\r\n\r\n")) == "HTTP/1.1 200 OK")
        #expect(statusLine(try server.exchange("GET /metrics HTTP/1.0\nHost: x\n\n")) == "HTTP/1.1 200 OK")
        #expect(body(try server.exchange("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", in: 7)) == "up 1\n")
        #expect(statusLine(try server.exchange("GET /empty HTTP/1.1\r\n\r\n")) == "HTTP/1.1 204 No Content")
    }

    @Test("an unknown path is 404")
    func notFound() throws {
        let server = try RunningEndpoint()
        let response = try server.exchange("GET /nothing-here HTTP/1.1\r\n\r\n")
        #expect(statusLine(response) == "HTTP/1.1 404 Not Found")
    }

    @Test("a method other than GET is 405 with Allow: GET")
    func methodNotAllowed() throws {
        let server = try RunningEndpoint()
        for method in ["POST", "PUT", "DELETE", "HEAD"] {
            let response = try server.exchange("\(method) /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
            #expect(statusLine(response) == "HTTP/1.1 405 Method Not Allowed", "\(method)")
            #expect(response.contains("\r\nAllow: GET\r\n"))
        }
    }

    @Test("a head over 8 KiB is refused with 431 without waiting for its end")
    func oversizeHead() throws {
        let server = try RunningEndpoint()
        let request = Array("GET /metrics HTTP/1.1\r\nX-Filler: ".utf8) + [UInt8](repeating: UInt8(ascii: "a"), count: 9000)
        let response = try server.exchange(request)
        #expect(statusLine(response) == "HTTP/1.1 431 Request Header Fields Too Large")
    }

    @Test("anything that is not an HTTP/1.x request head is 400", arguments: [
        "garbage\r\n\r\n",
        "\u{1}\u{2}\u{3}\r\n\r\n",
        "GET /metrics\r\n\r\n",
        "GET /metrics HTTP/2.0\r\n\r\n",
        "GET metrics HTTP/1.1\r\n\r\n",
        "GET  /metrics HTTP/1.1\r\n\r\n",
        "GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n",
        "GET /metrics HTTP/1.1\r\n: empty name\r\n\r\n",
        "\r\n\r\n",
    ])
    func garbage(request: String) throws {
        let server = try RunningEndpoint()
        #expect(statusLine(try server.exchange(request)) == "HTTP/1.1 400 Bad Request", "\(request.debugDescription)")
    }

    @Test("a connection that sends no whole head in time is closed")
    func idleConnectionsAreClosed() throws {
        let server = try RunningEndpoint(idleTimeout: .milliseconds(100))
        let silent = try BlockingSocket(port: server.port)
        #expect(silent.readToEnd() == "")
        #expect(!silent.timedOut)
        let partial = try BlockingSocket(port: server.port)
        partial.send(Array("GET /metrics HTTP/1.1\r\n".utf8)[...])
        #expect(partial.readToEnd() == "")
        #expect(!partial.timedOut)
    }
}
