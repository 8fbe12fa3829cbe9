#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization

/// A TCP relay from a port of 127.0.0.1 to another, on a thread of its own, that a test can
/// cut: every connection through it closed and new ones refused, while other clients of
/// the same server stay connected. Cuts one cluster node off from the nats-server its
/// peers still reach without leaving 127.0.0.1 (`GatewayClusterHarness(natsRelayed:)`).
/// Meant for a test's light traffic: it writes each read to the other side before reading on.
/// Its thread runs until `cut` (the harness cuts its relays when it stops).
public final class TCPRelay: @unchecked Sendable {
    public let port: Int
    private let targetPort: Int
    private let listener: Int32
    /// Set by `cut`; the relay's thread closes everything and sets `closed`.
    private let state = Mutex((cut: false, closed: false))

    public init(to targetPort: Int) throws {
        self.targetPort = targetPort
        (listener, port) = try LoopbackSocket.listen()
        let thread = Thread { [self] in run() }
        thread.name = "tcp-relay-\(port)"
        thread.start()
    }

    /// nats://127.0.0.1:PORT
    public var url: String { "nats://127.0.0.1:\(port)" }

    /// Closes every relayed connection and the listener (waiting up to 2 s for the relay's
    /// thread to have done it): a client that reconnects is refused.
    public func cut() {
        state.withLock { $0.cut = true }
        _ = waitUntil(timeoutSeconds: 2, pollMilliseconds: 10) { self.state.withLock { $0.closed } }
    }

    private func connectToTarget() -> Int32? {
        try? LoopbackSocket.connect(port: targetPort)
    }

    /// Polls the listener and both ends of every relayed connection; a side that ends or
    /// fails closes its pair.
    private func run() {
        var peer: [Int32: Int32] = [:]
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while !state.withLock({ $0.cut }) {
            var fds = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0)]
            fds += peer.keys.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            guard poll(&fds, nfds_t(fds.count), 50) > 0 else { continue }
            for entry in fds where entry.revents != 0 {
                if entry.fd == listener {
                    let client = accept(listener, nil, nil)
                    guard client >= 0 else { continue }
                    guard let server = connectToTarget() else {
                        close(client)
                        continue
                    }
                    peer[client] = server
                    peer[server] = client
                    continue
                }
                guard let other = peer[entry.fd] else { continue }
                let count = read(entry.fd, &buffer, buffer.count)
                if count > 0, writeAll(other, buffer, count) { continue }
                peer[entry.fd] = nil
                peer[other] = nil
                close(entry.fd)
                close(other)
            }
        }
        for fd in peer.keys { close(fd) }
        close(listener)
        state.withLock { $0.closed = true }
    }

    private func writeAll(_ fd: Int32, _ buffer: [UInt8], _ count: Int) -> Bool {
        var written = 0
        while written < count {
            let result = buffer.withUnsafeBytes { bytes -> Int in
                guard let base = bytes.baseAddress else { return -1 }
                return send(fd, base + written, count - written, Int32(MSG_NOSIGNAL))
            }
            if result <= 0 { return false }
            written += result
        }
        return true
    }
}
