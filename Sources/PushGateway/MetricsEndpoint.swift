#if canImport(Glibc)
import Glibc
#endif
import Prometheus

/// Serves `GET /metrics` in the Prometheus text format on its own thread, so a scrape
/// never waits on the event loop. The registry is safe to read from any thread.
public final class MetricsEndpoint: @unchecked Sendable {
    // @unchecked: `listenFD` is written before the thread starts and closed once in `stop`.
    private let registry: PrometheusCollectorRegistry
    private var listenFD: Int32 = -1
    private var thread: pthread_t?
    public private(set) var port = 0

    public init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
    }

    public enum Failure: Error, CustomStringConvertible {
        case socket(String, errno: Int32)
        public var description: String {
            switch self {
            case .socket(let operation, let code): "metrics endpoint: \(operation): \(String(cString: strerror(code)))"
            }
        }
    }

    /// Binds an IPv4 address (port 0 picks one) and starts answering.
    public func start(host: String, port: Int) throws(Failure) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .socket("socket", errno: errno) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
            close(fd)
            throw .socket("address \(host)", errno: EINVAL)
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            let code = errno
            close(fd)
            throw .socket("bind \(host):\(port)", errno: code)
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        self.port = Int(UInt16(bigEndian: actual.sin_port))
        listenFD = fd
        var handle = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        pthread_create(&handle, nil, { context in
            let endpoint = Unmanaged<MetricsEndpoint>.fromOpaque(context!).takeRetainedValue()
            endpoint.serve()
            return nil
        }, context)
        thread = handle
    }

    public func stop() {
        guard listenFD >= 0 else { return }
        shutdown(listenFD, Int32(SHUT_RDWR))
        close(listenFD)
        listenFD = -1
        if let thread { pthread_join(thread, nil) }
        thread = nil
    }

    private func serve() {
        let fd = listenFD
        while true {
            let client = accept(fd, nil, nil)
            guard client >= 0 else {
                if errno == EINTR { continue }
                return
            }
            answer(client)
            close(client)
        }
    }

    /// One request per connection; anything but GET /metrics is 404.
    private func answer(_ client: Int32) {
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var request: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1024)
        while request.count < 8192 {
            let count = chunk.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { break }
            request += chunk[..<count]
            if request.count >= 4, request.suffix(4).elementsEqual([13, 10, 13, 10]) { break }
        }
        let line = String(decoding: request.prefix { $0 != 13 && $0 != 10 }, as: UTF8.self)
        var body: [UInt8] = []
        let status: String
        if line.hasPrefix("GET /metrics ") || line == "GET /metrics" {
            registry.emit(into: &body)
            status = "200 OK"
        } else {
            body = Array("not found; try GET /metrics\n".utf8)
            status = "404 Not Found"
        }
        let head = "HTTP/1.1 \(status)\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        let response = Array(head.utf8) + body
        var offset = 0
        while offset < response.count {
            let sent = response.withUnsafeBytes { send(client, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { return }
            offset += sent
        }
    }
}
