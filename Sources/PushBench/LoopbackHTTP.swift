#if canImport(Glibc)
import Glibc
#endif
import PushClient
import PushEventLoop

/// A plain HTTP/1.0 GET to a numeric address, blocking with a short timeout: what
/// the bench needs to read a local nats-server's monitoring endpoint between phases
/// (never on a measured path). HTTP/1.0 so that the server closes after the body and no
/// chunked encoding comes back.
enum LoopbackHTTP {
    static let timeoutSeconds = 2

    /// The body of a 200 reply; anything else throws.
    static func get(_ address: HostPort, path: String) throws(BenchError) -> String {
        guard let remote = try? SocketAddress(host: address.host, port: address.port) else {
            throw .invalid("\(address.host) is not a numeric address")
        }
        let fd: Int32
        do {
            fd = try BlockingConnect.connect(to: remote, .init(receiveTimeoutMs: timeoutSeconds * 1000, sendTimeoutMs: timeoutSeconds * 1000))
        } catch where error.step == .socket {
            throw .setup("\(error)")
        } catch {
            throw .connect("http://\(address)\(path): \(String(cString: strerror(error.code)))")
        }
        defer { close(fd) }
        let request = Array("GET \(path) HTTP/1.0\r\nHost: \(address)\r\n\r\n".utf8)
        var sent = 0
        while sent < request.count {
            let count = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { throw .connect("http://\(address)\(path): \(String(cString: strerror(errno)))") }
            sent += count
        }
        var response: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { throw .connect("http://\(address)\(path): \(String(cString: strerror(errno)))") }
            if count == 0 { break }
            response.append(contentsOf: chunk[..<count])
            guard response.count < 4 * 1024 * 1024 else { throw .setup("http://\(address)\(path): reply over 4 MiB") }
        }
        return try body(of: response, from: "http://\(address)\(path)")
    }

    /// The body after the head of a whole response, if its status is 200.
    static func body(of response: [UInt8], from url: String) throws(BenchError) -> String {
        let separator = Array("\r\n\r\n".utf8)
        guard let end = (0...(max(response.count - separator.count, 0))).first(where: {
            $0 + separator.count <= response.count && response[$0..<($0 + separator.count)].elementsEqual(separator)
        }) else { throw .setup("\(url): no complete HTTP reply") }
        let statusLine = String(decoding: response[..<end].prefix { $0 != UInt8(ascii: "\r") }, as: UTF8.self)
        let parts = statusLine.split(separator: " ")
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/"), parts[1] == "200" else { throw .setup("\(url): \(statusLine)") }
        return String(decoding: response[(end + separator.count)...], as: UTF8.self)
    }
}

/// A free TCP port of 127.0.0.1: bound once, then released for a child process to take
/// (nats-server cannot be told to pick its own and say which it took).
func freeLoopbackPort() throws(BenchError) -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw .setup("socket: \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard bound else { throw .setup("cannot find a free port on 127.0.0.1: \(String(cString: strerror(errno)))") }
    return Int(UInt16(bigEndian: address.sin_port))
}
