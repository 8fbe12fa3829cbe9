#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Why no free port could be found.
public struct FreePortError: Error, CustomStringConvertible {
    public var description: String
}

/// A free TCP port on 127.0.0.1: bound once, then released for a server the test starts
/// to take (a server that can pick its own, with port 0, should).
///
/// It is picked below the kernel's ephemeral range: a port from that range (what binding
/// port 0 gives) can become the source port of any outgoing connection the other tests
/// make before the server binds it, and the server then fails with EADDRINUSE.
///
/// Ports are handed out in turn from a random start, so two tests of this process asking
/// at the same moment never get the same one.
public func freeLoopbackPort() throws -> Int {
    let (ephemeralStart, _) = ephemeralPortRange()
    let upper = ephemeralStart - 1
    let lower = max(1024, upper - 12_000)
    if upper > lower {
        for _ in 0..<64 {
            let port = nextCandidatePort.withLock { next -> Int in
                if next < lower || next > upper { next = Int.random(in: lower...upper) }
                defer { next = next >= upper ? lower : next + 1 }
                return next
            }
            if (try? bindLoopback(port: port)) == port { return port }
        }
    }
    return try bindLoopback(port: 0)
}

private let nextCandidatePort = Mutex(0)

/// Binds 127.0.0.1:`port` (0: any) once and returns the port bound.
private func bindLoopback(port: Int) throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw FreePortError(description: "socket: errno \(errno)") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard bound else { throw FreePortError(description: "bind: errno \(errno)") }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Linux's ip_local_port_range (32768-60999 when it cannot be read).
private func ephemeralPortRange() -> (Int, Int) {
    guard let file = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r") else { return (32768, 60999) }
    defer { fclose(file) }
    var low: Int32 = 0, high: Int32 = 0
    guard withUnsafeMutablePointer(to: &low, { lowPointer in
        withUnsafeMutablePointer(to: &high) { highPointer in
            withVaList([lowPointer, highPointer]) { vfscanf(file, "%d %d", $0) }
        }
    }) == 2 else { return (32768, 60999) }
    return (Int(low), Int(high))
}
