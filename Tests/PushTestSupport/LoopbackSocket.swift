#if canImport(Glibc)
import Glibc
#endif

/// A blocking TCP connection to a port on 127.0.0.1: the one way tests open a raw socket to a
/// server, whatever they then do with it (send a hostile byte stream, read nothing, relay).
public enum LoopbackSocket {
    /// The step that failed and its errno.
    public struct Failure: Error, CustomStringConvertible {
        public var step: String
        public var code: Int32
        public var description: String { "\(step): \(String(cString: strerror(code)))" }
    }

    /// The connected descriptor, close-on-exec, which the caller closes. `source`: a local
    /// address to connect from (any of 127.0.0.0/8 is loopback on Linux); the timeouts bound
    /// each blocking receive and send; `receiveBuffer`: SO_RCVBUF, set before the handshake
    /// so that the window the peer sees is small from the start.
    public static func connect(port: Int, from source: String? = nil, receiveTimeoutMs: Int? = nil, sendTimeoutMs: Int? = nil,
                               receiveBuffer: Int32? = nil) throws(Failure) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(step: "socket", code: errno) }
        if let receiveTimeoutMs { setTimeout(fd, SO_RCVTIMEO, receiveTimeoutMs) }
        if let sendTimeoutMs { setTimeout(fd, SO_SNDTIMEO, sendTimeoutMs) }
        if var size = receiveBuffer { setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
        if let source {
            var local = address(source, port: 0)
            guard withSocketAddress(&local, { bind(fd, $0, $1) }) == 0 else { throw failing(fd, "bind to \(source)") }
        }
        var remote = address("127.0.0.1", port: port)
        guard withSocketAddress(&remote, { Glibc.connect(fd, $0, $1) }) == 0 else { throw failing(fd, "connect to 127.0.0.1:\(port)") }
        return fd
    }

    /// An IPv4 address and port, as the socket calls take it.
    public static func address(_ host: String, port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port)).bigEndian
        address.sin_addr.s_addr = inet_addr(host)
        return address
    }

    private static func withSocketAddress(_ address: inout sockaddr_in, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
        withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }

    private static func setTimeout(_ fd: Int32, _ option: Int32, _ milliseconds: Int) {
        var timeout = timeval(tv_sec: milliseconds / 1000, tv_usec: (milliseconds % 1000) * 1000)
        setsockopt(fd, SOL_SOCKET, option, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    private static func failing(_ fd: Int32, _ step: String) -> Failure {
        let failure = Failure(step: step, code: errno)
        close(fd)
        return failure
    }
}
