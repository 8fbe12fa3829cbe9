import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One response read by `HTTPTestConnection`.
public struct HTTPTestResponse: Sendable {
    public var status: Int
    /// Header names lowercased.
    public var headers: [String: String]
    public var body: [UInt8]

    public var text: String { String(decoding: body, as: UTF8.self) }

    /// The body as a JSON object.
    public func json() throws -> [String: Any] {
        guard let object = try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
            throw ServiceError.failed("not a JSON object: \(text)")
        }
        return object
    }
}

/// An HTTP/1.1 client connection to 127.0.0.1 for tests that need what a library hides:
/// keep-alive, raw and partial requests, a slow writer. Blocking, with a receive timeout.
/// `@unchecked Sendable`: a test may read on one thread while it writes on another.
public final class HTTPTestConnection: @unchecked Sendable {
    private let fd: Int32
    private var buffered: [UInt8] = []

    /// `source`: the local address to connect from (any of 127.0.0.0/8 is loopback on Linux).
    public init(port: Int, timeoutMs: Int = 10_000, source: String? = nil) throws {
        do {
            fd = try LoopbackSocket.connect(port: port, from: source, receiveTimeoutMs: timeoutMs)
        } catch {
            throw ServiceError.failed(error.description)
        }
    }

    deinit { close(fd) }

    public func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { throw ServiceError.failed("send: \(errno)") }
            offset += written
        }
    }

    public func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// One request; `Content-Length` is added for a body.
    public func request(_ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8] = []) throws -> HTTPTestResponse {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if !body.isEmpty || method == "POST" { head += "Content-Length: \(body.count)\r\n" }
        try send(Array((head + "\r\n").utf8) + body)
        return try readResponse()
    }

    /// A POST of a JSON body with a bearer token.
    public func post(_ path: String, json: String, token: String?, headers: [(String, String)] = []) throws -> HTTPTestResponse {
        var all = [("Content-Type", "application/json")] + headers
        if let token { all.append(("Authorization", "Bearer \(token)")) }
        return try request("POST", path, headers: all, body: Array(json.utf8))
    }

    /// Reads one response: its head, then a body of Content-Length bytes.
    public func readResponse() throws -> HTTPTestResponse {
        while true {
            if let end = headEnd() {
                let head = String(decoding: buffered[..<end], as: UTF8.self)
                let lines = head.components(separatedBy: "\r\n")
                let statusField = lines.first?.split(separator: " ").dropFirst().first
                guard let statusField, let status = Int(statusField) else { throw ServiceError.failed("bad status line: \(head)") }
                var headers: [String: String] = [:]
                for line in lines.dropFirst() {
                    guard let colon = line.firstIndex(of: ":") else { continue }
                    headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                }
                let length = Int(headers["content-length"] ?? "0") ?? 0
                while buffered.count < end + 4 + length {
                    guard try fill() else { throw ServiceError.failed("the body ended early") }
                }
                let body = Array(buffered[(end + 4)..<(end + 4 + length)])
                buffered.removeFirst(end + 4 + length)
                return HTTPTestResponse(status: status, headers: headers, body: body)
            }
            guard try fill() else { throw ServiceError.failed("closed before a response: \(String(decoding: buffered, as: UTF8.self))") }
        }
    }

    /// Whether the server closed the connection (reading gives end of file or a reset)
    /// within the receive timeout; false when it stays open that long.
    public func closedByServer() -> Bool {
        var byte: UInt8 = 0
        let count = recv(fd, &byte, 1, 0)
        if count > 0 { buffered.append(byte) }
        return count == 0 || (count < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
    }

    /// Ends this side's sending (the server reads end of file), keeping the connection open
    /// for what the server still sends and its close.
    public func finishSending() {
        shutdown(fd, Int32(SHUT_WR))
    }

    /// Reads until the server closes (true) or the receive timeout passes (false).
    public func waitForClose() -> Bool {
        while true {
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = recv(fd, &chunk, chunk.count, 0)
            if count == 0 { return true }
            if count < 0 { return errno == ECONNRESET }
            buffered += chunk[..<count]
        }
    }

    private func headEnd() -> Int? {
        guard buffered.count >= 4 else { return nil }
        for index in 0...(buffered.count - 4) where buffered[index] == 13 && buffered[index + 1] == 10
            && buffered[index + 2] == 13 && buffered[index + 3] == 10 {
            return index
        }
        return nil
    }

    private func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count > 0 {
            buffered.append(contentsOf: chunk[..<count])
            return true
        }
        if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { throw ServiceError.failed("no response in time") }
        return false
    }
}

extension HTTPTestConnection {
    /// The same POST of a JSON body written on every connection before any answer is read,
    /// so that the server has them all in flight at once; the answers in connection order.
    public static func postAtOnce(_ connections: [HTTPTestConnection], path: String, json: String, token: String,
                                  headers: [(String, String)]) throws -> [HTTPTestResponse] {
        var head = "POST \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAuthorization: Bearer \(token)\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        let request = Array((head + "Content-Length: \(json.utf8.count)\r\n\r\n").utf8) + Array(json.utf8)
        for connection in connections { try connection.send(request) }
        return try connections.map { try $0.readResponse() }
    }
}
