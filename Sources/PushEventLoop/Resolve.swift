import CLibevent
import Glibc

extension SocketAddress {
    /// Every address `host` stands for, in the order the system prefers, without duplicates.
    ///
    /// A numeric address (`127.0.0.1`, `::1`, `[::1]`, `fe80::1%eth0`) is parsed in
    /// process and never waits on anything. Any other host is a name, looked up with
    /// getaddrinfo (/etc/hosts, then DNS): that call blocks, so do it when a service
    /// starts or a client (re)connects, never per request. `forListening` asks for the
    /// addresses a listener binds (the same lookup, with AI_PASSIVE).
    public static func resolve(host: String, port: Int, forListening: Bool = false) throws(EventLoopError) -> [SocketAddress] {
        guard (0...65535).contains(port) else { throw .invalidAddress(HostPort(host: host, port: port).description) }
        if let literal = try? SocketAddress(host: host, port: port) { return [literal] }
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        guard !bare.isEmpty else { throw .invalidAddress(host) }
        // Numeric forms inet_pton does not take (a scope id) first, still without a lookup.
        var numericFlags = AI_NUMERICHOST | AI_NUMERICSERV
        if forListening { numericFlags |= AI_PASSIVE }
        switch lookup(bare, port: port, flags: numericFlags) {
        case .success(let found): return found
        case .failure:
            break
        }
        var flags = AI_NUMERICSERV
        if forListening { flags |= AI_PASSIVE }
        switch lookup(bare, port: port, flags: flags) {
        case .success(let found): return found
        case .failure(let code, let systemErrno):
            let reason = code == EAI_SYSTEM ? String(cString: strerror(systemErrno)) : String(cString: gai_strerror(code))
            // EAI_AGAIN: no answer from the name server this time; EAI_NONAME and the rest
            // will not change by asking again.
            throw .cannotResolve(host: bare, reason: reason, temporary: code == EAI_AGAIN || code == EAI_SYSTEM)
        }
    }

    private enum Lookup {
        case success([SocketAddress])
        case failure(code: Int32, errno: Int32)
    }

    private static func lookup(_ host: String, port: Int, flags: Int32) -> Lookup {
        var hints = addrinfo()
        hints.ai_flags = flags
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        let code = getaddrinfo(host, String(port), &hints, &result)
        let systemErrno = errno
        guard code == 0 else { return .failure(code: code, errno: systemErrno) }
        defer { freeaddrinfo(result) }
        var found: [SocketAddress] = []
        var entry = result
        while let info = entry {
            if let raw = info.pointee.ai_addr, let address = SocketAddress(raw, length: Int(info.pointee.ai_addrlen)),
               !found.contains(address) {
                found.append(address)
            }
            entry = info.pointee.ai_next
        }
        // A name with only addresses of families we do not speak.
        return found.isEmpty ? .failure(code: EAI_NONAME, errno: 0) : .success(found)
    }

    /// `0.0.0.0` or `::`: every local address of the family.
    public var isUnspecified: Bool {
        isIPv6 ? host == "::" : host == "0.0.0.0"
    }
}

extension HostPort {
    /// The socket addresses this names (see `SocketAddress.resolve`): a numeric host at
    /// once, a name through a blocking lookup.
    public func resolve(forListening: Bool = false) throws(EventLoopError) -> [SocketAddress] {
        try SocketAddress.resolve(host: host, port: port, forListening: forListening)
    }

    /// True when `host` is an IPv4 or IPv6 literal, which resolves without a lookup.
    public var isNumeric: Bool { (try? SocketAddress(host: host, port: 0)) != nil }
}
