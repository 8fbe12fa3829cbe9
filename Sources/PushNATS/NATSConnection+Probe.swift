import CNats
import Glibc

extension NATSConnection {
    /// One connection attempt through the servers in order, on libnats' own threads, closed
    /// again at once: it tells a refusal (a server's certificate not trusted, ours missing
    /// or rejected, wrong credentials), which retrying never mends, from a server not
    /// there yet, which a connection finds later by itself. Returns when connected or
    /// when no server answered; throws `.refused` with libnats' reason otherwise.
    ///
    /// A `NATSConnection` retries every failure for ever in the background, so a service
    /// calls this before starting, to fail at once with the reason.
    public static func probe(servers: [String], name: String, security: NATSSecurity,
                             timeout: Duration = .seconds(2)) throws(NATSError) {
        guard !servers.isEmpty else { throw .invalidURL("no servers") }
        for server in servers { try NATSNames.checkServer(server) }
        var options: OpaquePointer?
        try check(natsOptions_Create(&options))
        guard let options else { throw .library(status: -1, text: "natsOptions_Create returned nothing") }
        defer { natsOptions_Destroy(options) }
        try configureServers(options, servers: servers, name: name, timeout: timeout)
        try check(natsOptions_SetAllowReconnect(options, false))
        try security.apply(to: options)
        var made: OpaquePointer?
        let status = natsConnection_Connect(&made, options)
        if let made {
            natsConnection_Close(made)
            natsConnection_Destroy(made)
        }
        switch status {
        case NATS_OK:
            return
        case NATS_NO_SERVER, NATS_TIMEOUT:
            // Nothing answered: the connection itself keeps trying.
            return
        default:
            let error = NATSError.library(status)
            var reason: String
            if case .library(_, let text) = error { reason = text } else { reason = error.description }
            let overTLS = security.tls != nil || servers.contains { $0.hasPrefix("tls://") }
            if overTLS, reason.contains("Expected 'PONG'") {
                // libnats' words ("Expected 'PONG', got ''") when a server that verifies
                // clients closes the connection once the TLS handshake is done.
                reason = Self.closedAfterHandshake(clientCertificate: security.tls?.certificateFile != nil)
            }
            throw .refused(server: NATSNames.redacted(servers), reason: reason)
        }
    }

    /// Why a server closed the connection at the end of the TLS handshake, most likely.
    static func closedAfterHandshake(clientCertificate: Bool) -> String {
        clientCertificate
            ? "it closed the connection at the end of the TLS handshake: most likely it does not trust the client certificate given (is it signed by a CA the server trusts, and still valid?)"
            : "it closed the connection at the end of the TLS handshake: most likely it requires a client certificate, and none was given"
    }
}
