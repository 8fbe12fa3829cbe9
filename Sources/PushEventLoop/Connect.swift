import CLibevent
import Glibc

extension Connection {
    /// Opens a connection to a numeric `host` without blocking the loop.
    ///
    /// `onConnected` runs exactly once on the loop thread, and not inside this call
    /// (except on a loop that has shut down, where it reports `.cancelled` at once):
    /// with the open connection (install its handler there; reading starts when it
    /// returns), or with the reason it failed. For TLS the connection counts as open once the
    /// handshake and certificate checks have passed; `serverName` (default: `host`) is
    /// what the certificate must name and, for DNS names, the SNI sent. An explicitly
    /// empty `serverName` skips the name check (the chain is still verified).
    /// `sourceAddress` binds the local end first (e.g. one of several 127.0.0.x, to get
    /// past one address's ephemeral-port range).
    ///
    /// Returns the connecting connection, whose `close()` cancels the attempt
    /// (`.cancelled`), or nil when the attempt failed at once (the failure is still
    /// reported through `onConnected`).
    @discardableResult
    public static func connect(
        loop: EventLoop, host: String, port: Int, tls: TLSContext? = nil, serverName: String? = nil,
        sourceAddress: String? = nil, onConnected: @escaping (Result<Connection, ConnectError>) -> Void
    ) -> Connection? {
        func fail(_ error: ConnectError) -> Connection? {
            if loop.acceptsNewResources {
                loop.schedule(after: .zero) { onConnected(.failure(error)) }
            } else {
                onConnected(.failure(.cancelled))
            }
            return nil
        }
        guard loop.acceptsNewResources else { return fail(.cancelled) }
        guard let remote = try? SocketAddress(host: host, port: port) else { return fail(.invalidAddress(host)) }
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

        let bev: OpaquePointer
        if let tls {
            let ssl: OpaquePointer
            switch tls.makeClientSSL(serverName: serverName ?? host) {
            case .success(let made): ssl = made
            case .failure(let error):
                Glibc.close(fd)
                return fail(error)
            }
            guard let made = bufferevent_openssl_socket_new(loop.base, fd, ssl, BUFFEREVENT_SSL_CONNECTING,
                                                            sp_BEV_OPT_CLOSE_ON_FREE)
            else {
                SSL_free(ssl)
                return fail(.system(errno: ENOMEM))
            }
            bev = made
        } else {
            guard let made = bufferevent_socket_new(loop.base, fd, sp_BEV_OPT_CLOSE_ON_FREE) else {
                Glibc.close(fd)
                return fail(.system(errno: ENOMEM))
            }
            bev = made
        }
        let connection = Connection(loop: loop, bev: bev, tls: tls != nil, connecting: true)
        connection.awaitConnect(onConnected)
        // Non-blocking; completion (or refusal, even an immediate one) comes back through
        // the event callback on a later iteration.
        let started = remote.withSockAddr { bufferevent_socket_connect(bev, $0, Int32($1)) }
        guard started == 0 else {
            let code = errno
            connection.abandonConnect()
            return fail(.system(errno: code == 0 ? EIO : code))
        }
        return connection
    }
}
