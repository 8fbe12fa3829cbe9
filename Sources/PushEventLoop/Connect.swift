import CLibevent
import Glibc

extension Connection {
    /// Opens a connection to `host` (a numeric address, or a name looked up first) without
    /// blocking the loop on the connect itself.
    ///
    /// A numeric host costs no lookup. A name is resolved with a blocking getaddrinfo
    /// before the connect starts, and the first address it gives is the one tried: a
    /// caller that wants to fall back to the others resolves with
    /// `SocketAddress.resolve(host:port:)` and calls `connect(loop:to:...)` for each in
    /// turn (as `ServerLink` does). A name that does not resolve reports `.cannotResolve`.
    ///
    /// `onConnected` runs exactly once on the loop thread, and not inside this call
    /// (except on a loop that has shut down, where it reports `.cancelled` at once):
    /// with the open connection (install its handler there; reading starts when it
    /// returns), or with the reason it failed. For TLS the connection counts as open once the
    /// handshake and certificate checks have passed; `serverName` (default: `host`) is
    /// what the certificate must name and, for DNS names, the SNI sent. An explicitly
    /// empty `serverName` skips the name check (the chain is still verified).
    /// `sourceAddress` (numeric) binds the local end first (e.g. one of several 127.0.0.x,
    /// to get past one address's ephemeral-port range).
    ///
    /// Returns the connecting connection, whose `close()` cancels the attempt
    /// (`.cancelled`), or nil when the attempt failed at once (the failure is still
    /// reported through `onConnected`).
    @discardableResult
    public static func connect(
        loop: EventLoop, host: String, port: Int, tls: TLSContext? = nil, serverName: String? = nil,
        sourceAddress: String? = nil, onConnected: @escaping (Result<Connection, ConnectError>) -> Void
    ) -> Connection? {
        let remote: SocketAddress
        do {
            guard let first = try SocketAddress.resolve(host: host, port: port).first else {
                return failConnect(loop, .invalidAddress(host), onConnected)
            }
            remote = first
        } catch {
            return failConnect(loop, ConnectError(error), onConnected)
        }
        return connect(loop: loop, to: remote, tls: tls, serverName: serverName ?? host, sourceAddress: sourceAddress,
                       onConnected: onConnected)
    }

    /// Opens a connection to an address already resolved; see `connect(loop:host:...)`.
    /// For TLS, `serverName` is what the certificate must name (nil: the address itself).
    @discardableResult
    public static func connect(
        loop: EventLoop, to remote: SocketAddress, tls: TLSContext? = nil, serverName: String? = nil,
        sourceAddress: String? = nil, onConnected: @escaping (Result<Connection, ConnectError>) -> Void
    ) -> Connection? {
        func fail(_ error: ConnectError) -> Connection? { failConnect(loop, error, onConnected) }
        guard loop.acceptsNewResources else { return fail(.cancelled) }
        let fd = socket(remote.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
                            | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return fail(.system(errno: errno)) }
        if let sourceAddress {
            guard let local = try? SocketAddress(host: sourceAddress, port: 0), local.family == remote.family else {
                Glibc.close(fd)
                return fail(.invalidAddress(sourceAddress))
            }
            // Defer the port choice to connect(), which can then reuse a port across
            // different destinations instead of burning one per bind().
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_IP), IP_BIND_ADDRESS_NO_PORT, &one, socklen_t(MemoryLayout<Int32>.size))
            guard local.withSockAddr({ Glibc.bind(fd, $0, $1) }) == 0 else {
                let code = errno
                Glibc.close(fd)
                return fail(.bindFailed(address: sourceAddress, errno: code))
            }
        }
        setNoDelay(fd)

        let transport: any Transport
        if let tls {
            switch TLSTransport.connecting(loop: loop, fd: fd, context: tls, serverName: serverName ?? remote.host) {
            case .success(let made): transport = made
            case .failure(let error): return fail(error)
            }
        } else {
            guard let made = PlainTCPTransport.make(loop: loop, fd: fd, connecting: true) else {
                return fail(.system(errno: ENOMEM))
            }
            transport = made
        }
        let connection = Connection(loop: loop, transport: transport, connecting: true)
        connection.awaitConnect(onConnected)
        let code = transport.connect(to: remote)
        guard code == 0 else {
            connection.abandonConnect()
            return fail(code == ECONNREFUSED ? .refused : .system(errno: code))
        }
        return connection
    }

    /// Reports a connect that failed before it started: on a later pass of the loop, or at
    /// once as `.cancelled` on a loop that has shut down.
    private static func failConnect(
        _ loop: EventLoop, _ error: ConnectError, _ onConnected: @escaping (Result<Connection, ConnectError>) -> Void
    ) -> Connection? {
        if loop.acceptsNewResources {
            loop.schedule(after: .zero) { onConnected(.failure(error)) }
        } else {
            onConnected(.failure(.cancelled))
        }
        return nil
    }
}
