#if canImport(Glibc)
import Glibc
#endif

/// Why no free port could be found.
public struct FreePortError: Error, CustomStringConvertible {
    public var description: String
}

/// A free TCP port on 127.0.0.1: bound once, then released for a server the test starts
/// to take (a server that can pick its own, with port 0, should).
public func freeLoopbackPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw FreePortError(description: "socket: errno \(errno)") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard bound else { throw FreePortError(description: "bind: errno \(errno)") }
    return Int(UInt16(bigEndian: address.sin_port))
}
