import Foundation
import Glibc
import PushTestSupport

/// A deliberately wrong server on 127.0.0.1: it accepts connections and answers whatever
/// arrives with bytes that are no frame at all, with an HTTP error, or never. The suite
/// must say so at once, and must not hang.
final class FakePeer: @unchecked Sendable {
    enum Behaviour: Sendable {
        /// Reads what comes and answers with 0xFF bytes (bad magic), keeping the socket open.
        case garbage
        /// Reads what comes and never writes.
        case silent
        /// Answers whatever arrives as an HTTP server answers a request it cannot parse:
        /// 400 Bad Request, then it closes.
        case http
    }

    static let httpAnswer = Array("HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 12\r\nConnection: close\r\n\r\nbad request\n".utf8)

    let port: Int
    private let listener: Int32
    private let behaviour: Behaviour
    private let lock = NSLock()
    private var stopping = false
    private let done = DispatchSemaphore(value: 0)

    init(_ behaviour: Behaviour) throws {
        self.behaviour = behaviour
        (listener, port) = try LoopbackSocket.listen(backlog: 64)
        let thread = Thread { [self] in serve() }
        thread.start()
    }

    private var isStopping: Bool { lock.withLock { stopping } }

    /// One thread polls the listener and every accepted socket, so nothing blocks for
    /// longer than a poll interval and `stop` ends it promptly.
    private func serve() {
        var clients: [Int32] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let garbage = [UInt8](repeating: 0xFF, count: 64)
        while !isStopping {
            var polls = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0)] + clients.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            guard poll(&polls, nfds_t(polls.count), 50) >= 0 else { continue }
            if polls[0].revents != 0 {
                let client = accept(listener, nil, nil)
                if client >= 0 { clients.append(client) }
            }
            for entry in polls.dropFirst() where entry.revents != 0 {
                let count = buffer.withUnsafeMutableBytes { recv(entry.fd, $0.baseAddress, $0.count, 0) }
                if count <= 0 {
                    close(entry.fd)
                    clients.removeAll { $0 == entry.fd }
                } else if behaviour == .garbage {
                    _ = garbage.withUnsafeBytes { send(entry.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                } else if behaviour == .http {
                    _ = FakePeer.httpAnswer.withUnsafeBytes { send(entry.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    close(entry.fd)
                    clients.removeAll { $0 == entry.fd }
                }
            }
        }
        clients.forEach { close($0) }
        close(listener)
        done.signal()
    }

    func stop() {
        let first = lock.withLock { () -> Bool in
            defer { stopping = true }
            return !stopping
        }
        if first { _ = done.wait(timeout: .now() + 2) }
    }

    deinit { stop() }
}
