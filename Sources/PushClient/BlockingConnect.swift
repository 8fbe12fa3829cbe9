#if canImport(Glibc)
import Glibc
#endif
import PushEventLoop

/// A blocking TCP connect: the one way a blocking client opens a socket (the frame client
/// here, the conformance probe, the bench's HTTP GET to nats-server, the tests' raw
/// connections). The event loop's clients connect without blocking (`Connection.connect`).
public enum BlockingConnect {
    /// The step that failed and its errno.
    public struct Failure: Error, CustomStringConvertible {
        public enum Step: String, Sendable { case socket, bind, connect }
        public var step: Step
        public var code: Int32
        public var description: String { "\(step.rawValue): \(String(cString: strerror(code)))" }

        public init(step: Step, code: Int32) {
            self.step = step
            self.code = code
        }
    }

    /// What is set on the socket before the handshake.
    public struct Options: Sendable {
        /// A numeric local address to connect from (any of 127.0.0.0/8 is loopback on Linux).
        public var source: String?
        /// Bounds each blocking receive.
        public var receiveTimeoutMs: Int?
        /// Bounds each blocking send, and the connect itself (Linux applies SO_SNDTIMEO to
        /// connect(); it then fails with EINPROGRESS).
        public var sendTimeoutMs: Int?
        /// SO_RCVBUF, set before the handshake so that the window the peer sees is small
        /// from the start (slow-consumer tests).
        public var receiveBufferBytes: Int32?
        /// SO_SNDBUF: room for requests a peer that stopped reading has not taken yet
        /// (a client that pipelines before it reads any reply).
        public var sendBufferBytes: Int32?
        public var noDelay: Bool

        public init(source: String? = nil, receiveTimeoutMs: Int? = nil, sendTimeoutMs: Int? = nil,
                    receiveBufferBytes: Int32? = nil, sendBufferBytes: Int32? = nil, noDelay: Bool = false) {
            self.source = source
            self.receiveTimeoutMs = receiveTimeoutMs
            self.sendTimeoutMs = sendTimeoutMs
            self.receiveBufferBytes = receiveBufferBytes
            self.sendBufferBytes = sendBufferBytes
            self.noDelay = noDelay
        }
    }

    /// The connected descriptor, close-on-exec, which the caller closes.
    public static func connect(to remote: SocketAddress, _ options: Options = Options()) throws(Failure) -> Int32 {
        let fd = socket(remote.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(step: .socket, code: errno) }
        if let milliseconds = options.receiveTimeoutMs { setTimeout(fd, SO_RCVTIMEO, milliseconds) }
        if let milliseconds = options.sendTimeoutMs { setTimeout(fd, SO_SNDTIMEO, milliseconds) }
        if var size = options.receiveBufferBytes { setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
        if var size = options.sendBufferBytes { setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
        if options.noDelay {
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        if let source = options.source {
            guard let local = try? SocketAddress(host: source, port: 0) else { throw failing(fd, .bind, code: EINVAL) }
            guard local.withSockAddr({ bind(fd, $0, $1) }) == 0 else { throw failing(fd, .bind, code: errno) }
        }
        guard remote.withSockAddr({ Glibc.connect(fd, $0, $1) }) == 0 else { throw failing(fd, .connect, code: errno) }
        return fd
    }

    private static func setTimeout(_ fd: Int32, _ option: Int32, _ milliseconds: Int) {
        var timeout = timeval(tv_sec: milliseconds / 1000, tv_usec: (milliseconds % 1000) * 1000)
        setsockopt(fd, SOL_SOCKET, option, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    private static func failing(_ fd: Int32, _ step: Failure.Step, code: Int32) -> Failure {
        close(fd)
        return Failure(step: step, code: code)
    }
}
