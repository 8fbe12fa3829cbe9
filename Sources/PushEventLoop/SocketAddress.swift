import CLibevent
import Glibc

/// A numeric IPv4 or IPv6 socket address. This type never resolves a name: that is
/// `SocketAddress.resolve(host:port:)`'s job (see Resolve.swift), done once when a
/// service starts or a client connects, never on the event loop's busy path.
public struct SocketAddress: Sendable, Equatable, CustomStringConvertible {
    // sockaddr_in6 is the largest family we accept; sockaddr_storage would cost 128 bytes.
    private var storage: sockaddr_in6
    public let isIPv6: Bool

    /// Parses "127.0.0.1", "::1" or "[::1]" (brackets optional for IPv6).
    public init(host: String, port: Int) throws(EventLoopError) {
        guard (0...65535).contains(port) else { throw .invalidAddress("\(host):\(port)") }
        var literal = Substring(host)
        if literal.hasPrefix("["), literal.hasSuffix("]") {
            literal = literal.dropFirst().dropLast()
        }
        var v6 = sockaddr_in6()
        var v4 = sockaddr_in()
        if inet_pton(AF_INET, String(literal), &v4.sin_addr) == 1 {
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = in_port_t(UInt16(port)).bigEndian
            storage = SocketAddress.widen(v4)
            isIPv6 = false
        } else if inet_pton(AF_INET6, String(literal), &v6.sin6_addr) == 1 {
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = in_port_t(UInt16(port)).bigEndian
            storage = v6
            isIPv6 = true
        } else {
            throw .invalidAddress(host)
        }
    }

    /// Copies an address the kernel or libevent handed us; nil for families we do not speak.
    init?(_ address: UnsafePointer<sockaddr>, length: Int) {
        switch Int32(address.pointee.sa_family) {
        case AF_INET where length >= MemoryLayout<sockaddr_in>.size:
            storage = SocketAddress.widen(UnsafeRawPointer(address).loadUnaligned(as: sockaddr_in.self))
            isIPv6 = false
        case AF_INET6 where length >= MemoryLayout<sockaddr_in6>.size:
            storage = UnsafeRawPointer(address).loadUnaligned(as: sockaddr_in6.self)
            isIPv6 = true
        default:
            return nil
        }
    }

    private static func widen(_ v4: sockaddr_in) -> sockaddr_in6 {
        var wide = sockaddr_in6()
        withUnsafeBytes(of: v4) { source in
            withUnsafeMutableBytes(of: &wide) { $0.copyMemory(from: source) }
        }
        return wide
    }

    static func local(of fd: Int32) -> SocketAddress? { query(fd, getsockname) }
    static func peer(of fd: Int32) -> SocketAddress? { query(fd, getpeername) }

    private static func query(
        _ fd: Int32,
        _ call: (Int32, UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<socklen_t>) -> Int32
    ) -> SocketAddress? {
        var raw = sockaddr_in6()
        var length = socklen_t(MemoryLayout<sockaddr_in6>.size)
        return withUnsafeMutablePointer(to: &raw) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                guard call(fd, address, &length) == 0 else { return nil }
                return SocketAddress(address, length: Int(length))
            }
        }
    }

    public var family: Int32 { isIPv6 ? AF_INET6 : AF_INET }

    var length: socklen_t {
        socklen_t(isIPv6 ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size)
    }

    public var port: Int {
        // sin_port and sin6_port sit at the same offset.
        Int(UInt16(bigEndian: storage.sin6_port))
    }

    /// The same address on another port.
    public func withPort(_ port: Int) -> SocketAddress {
        var copy = self
        // sin_port and sin6_port sit at the same offset.
        copy.storage.sin6_port = in_port_t(UInt16(truncatingIfNeeded: port)).bigEndian
        return copy
    }

    public var host: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let ok: Bool = withUnsafeBytes(of: storage) { raw in
            if isIPv6 {
                var address = raw.loadUnaligned(as: sockaddr_in6.self).sin6_addr
                return inet_ntop(AF_INET6, &address, &buffer, socklen_t(buffer.count)) != nil
            }
            var address = raw.loadUnaligned(as: sockaddr_in.self).sin_addr
            return inet_ntop(AF_INET, &address, &buffer, socklen_t(buffer.count)) != nil
        }
        guard ok else { return "?" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    public var description: String { isIPv6 ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// The address as the socket calls take it (bind, connect, sendto).
    public func withSockAddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        withUnsafeBytes(of: storage) { raw in
            body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), length)
        }
    }

    public static func == (lhs: SocketAddress, rhs: SocketAddress) -> Bool {
        lhs.isIPv6 == rhs.isIPv6 && lhs.host == rhs.host && lhs.port == rhs.port
    }
}
