import CNats

/// How a connection proves itself to NATS and checks the server: TLS (a CA to verify the
/// server with, optionally a client certificate) and at most one kind of credentials.
/// Kept apart from the connection's other options so either can change on its own.
public struct NATSSecurity: Sendable, Equatable {
    public struct TLS: Sendable, Equatable {
        /// PEM CA certificates the server's certificate must chain to.
        public var caFile: String
        /// A client certificate (PEM chain) and its key, for servers that verify clients.
        public var certificateFile: String?
        public var keyFile: String?
        /// The name the server's certificate must carry (libnats' expected hostname);
        /// nil: the host of the URL connected to, as libnats checks by default.
        public var serverName: String?

        public init(caFile: String, certificateFile: String? = nil, keyFile: String? = nil, serverName: String? = nil) {
            self.caFile = caFile
            self.certificateFile = certificateFile
            self.keyFile = keyFile
            self.serverName = serverName
        }
    }

    public enum Credentials: Sendable, Equatable {
        case none
        case user(String, password: String)
        case token(String)
        /// An NATS credentials file (`.creds`: a user JWT and its nkey seed), read by libnats
        /// at each connect.
        case credentialsFile(String)
    }

    /// nil: TLS only if a server URL says `tls://` (then checked against the system CAs).
    public var tls: TLS?
    public var credentials: Credentials

    public init(tls: TLS? = nil, credentials: Credentials = .none) {
        self.tls = tls
        self.credentials = credentials
    }

    /// Sets these on libnats options, before the connection is made. Never skips
    /// verification of the server's certificate.
    func apply(to options: OpaquePointer) throws(NATSError) {
        if let tls { try applyTLS(tls, to: options) }
        switch credentials {
        case .none:
            break
        case .user(let user, let password):
            try NATSConnection.check(natsOptions_SetUserInfo(options, user, password))
        case .token(let token):
            try NATSConnection.check(natsOptions_SetToken(options, token))
        case .credentialsFile(let path):
            try NATSConnection.check(natsOptions_SetUserCredentialsFromFiles(options, path, nil))
        }
    }

    private func applyTLS(_ tls: TLS, to options: OpaquePointer) throws(NATSError) {
        // Secure even for nats:// URLs: a server that offers no TLS is then refused.
        try NATSConnection.check(natsOptions_SetSecure(options, true))
        do {
            try NATSConnection.check(natsOptions_LoadCATrustedCertificates(options, tls.caFile))
        } catch {
            throw .tlsFile(path: tls.caFile, reason: error.description)
        }
        switch (tls.certificateFile, tls.keyFile) {
        case (nil, nil):
            break
        case (let certificate?, let key?):
            do {
                try NATSConnection.check(natsOptions_LoadCertificatesChain(options, certificate, key))
            } catch {
                throw .tlsFile(path: "\(certificate) and \(key)", reason: error.description)
            }
        default:
            throw .tlsFile(path: tls.certificateFile ?? tls.keyFile ?? "", reason: "a client certificate and its key go together")
        }
        if let serverName = tls.serverName {
            try NATSConnection.check(natsOptions_SetExpectedHostname(options, serverName))
        }
    }
}
