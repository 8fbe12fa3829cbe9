#if canImport(Glibc)
import Glibc
#endif
import PushClient
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
        guard let remote = try? SocketAddress(host: endpoint.host, port: endpoint.port) else {
            throw ChannelOpenFailure(description: "cannot use address \(endpoint.host)", refused: false)
        }
        do {
            // The send timeout bounds connect() too.
            fd = try BlockingConnect.connect(to: remote, .init(sendTimeoutMs: Int(timeoutMs)))
        } catch where error.step == .connect {
            let text = error.code == EINPROGRESS ? "no connection within \(timeoutMs) ms" : String(cString: strerror(error.code)).lowercased()
            throw ChannelOpenFailure(description: text, refused: error.code == ECONNREFUSED)
        } catch {
            throw ChannelOpenFailure(description: String(cString: strerror(error.code)), refused: false)
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
