#if canImport(Glibc)
import Glibc
#endif
import PushClient
import PushEventLoop

/// Raw TCP sockets on 127.0.0.1 for tests: a blocking connection to a server (to send a
/// hostile byte stream, read nothing, relay), and a listening socket for a fake peer.
/// The connect is `BlockingConnect`'s, which the blocking clients of the sources use too.
public enum LoopbackSocket {
    public typealias Failure = BlockingConnect.Failure

    /// A connected descriptor to 127.0.0.1:`port`, close-on-exec, which the caller closes.
    /// `source`: a local address to connect from (any of 127.0.0.0/8 is loopback on Linux);
    /// the timeouts bound each blocking receive and send; `receiveBuffer`: SO_RCVBUF, set
    /// before the handshake so that the window the peer sees is small from the start.
    public static func connect(port: Int, from source: String? = nil, receiveTimeoutMs: Int? = nil, sendTimeoutMs: Int? = nil,
                               receiveBuffer: Int32? = nil) throws(Failure) -> Int32 {
        guard let remote = try? SocketAddress(host: "127.0.0.1", port: port) else { throw Failure(step: .connect, code: EINVAL) }
        return try BlockingConnect.connect(to: remote, .init(source: source, receiveTimeoutMs: receiveTimeoutMs, sendTimeoutMs: sendTimeoutMs,
                                                             receiveBufferBytes: receiveBuffer))
    }

    /// A socket listening on a port of 127.0.0.1 the kernel picked, and that port; the
    /// caller accepts on it and closes it. `nonBlocking` for a listener an event loop watches.
    public static func listen(backlog: Int32 = 16, nonBlocking: Bool = false) throws -> (fd: Int32, port: Int) {
        let flags = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | (nonBlocking ? Int32(SOCK_NONBLOCK.rawValue) : 0)
        let fd = socket(AF_INET, flags, 0)
        guard fd >= 0 else { throw FreePortError(description: "socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && Glibc.listen(fd, backlog) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard listening else {
            let failure = FreePortError(description: "listen on 127.0.0.1: \(String(cString: strerror(errno)))")
            close(fd)
            throw failure
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }
}
