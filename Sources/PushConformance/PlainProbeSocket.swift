#if canImport(Glibc)
import Glibc
#endif
import PushClock
import PushEventLoop
import PushSession

/// The probe's plain TCP connection: a blocking socket that keeps the raw bytes the peer
/// answers with (an HTTP status line, say), which a frame client would only report as a
/// framing error. No event loop, so probing costs one descriptor.
final class PlainProbeSocket: ProbeConnection {
    private let fd: Int32
    private(set) var firstBytes: [UInt8] = []
    private(set) var peerClosed = false

    init(_ endpoint: HostPort, timeoutMs: Int32) throws(ChannelOpenFailure) {
        var hints = addrinfo()
        hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(endpoint.host, String(endpoint.port), &hints, &result) == 0, let info = result else {
            throw ChannelOpenFailure(description: "cannot use address \(endpoint.host)", refused: false)
        }
        defer { freeaddrinfo(result) }
        fd = socket(info.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ChannelOpenFailure(description: String(cString: strerror(errno)), refused: false) }
        // Bounds connect() too (Linux applies the send timeout to it).
        var timeout = timeval(tv_sec: Int(timeoutMs / 1000), tv_usec: Int(timeoutMs % 1000) * 1000)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard Glibc.connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 else {
            let code = errno
            Glibc.close(fd)
            let text = code == EINPROGRESS ? "no connection within \(timeoutMs) ms" : String(cString: strerror(code)).lowercased()
            throw ChannelOpenFailure(description: text, refused: code == ECONNREFUSED)
        }
    }

    deinit { Glibc.close(fd) }

    func sendRaw(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    func awaitBytes(_ count: Int, timeoutMs: Int32) {
        let deadline = Clocks.monotonicMilliseconds() + Int64(timeoutMs)
        var chunk = [UInt8](repeating: 0, count: 4096)
        while firstBytes.count < count, !peerClosed {
            let remaining = deadline - Clocks.monotonicMilliseconds()
            guard remaining > 0 else { return }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(clamping: remaining))
            if ready < 0, errno == EINTR { continue }
            guard ready > 0 else { return }
            let received = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard received > 0 else {
                peerClosed = true
                return
            }
            firstBytes += chunk[..<min(received, LoopWireChannel.keptBytes - firstBytes.count)]
        }
    }
}

/// What the probe needs of a connection, plain or TLS.
protocol ProbeConnection: AnyObject {
    var firstBytes: [UInt8] { get }
    var peerClosed: Bool { get }
    func awaitBytes(_ count: Int, timeoutMs: Int32)
}
