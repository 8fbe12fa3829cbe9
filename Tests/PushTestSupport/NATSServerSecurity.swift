/// What a test's nats-server asks of its clients: TLS with its certificate, optionally a
/// client certificate signed by `clientCAFile`, and a user and password or a token.
public struct NATSServerSecurity: Sendable {
    public struct TLS: Sendable {
        public var certificateFile: String
        public var keyFile: String
        /// Clients must present a certificate this CA signed (nats-server --tlsverify).
        public var clientCAFile: String?

        public init(certificateFile: String, keyFile: String, clientCAFile: String? = nil) {
            self.certificateFile = certificateFile
            self.keyFile = keyFile
            self.clientCAFile = clientCAFile
        }
    }

    public enum Authentication: Sendable {
        case none
        case user(String, password: String)
        case token(String)
        /// A config file of nats-server's own (`-c`), as for JWT authentication
        /// (`NATSDecentralizedAuth`).
        case configFile(String)
    }

    public var tls: TLS?
    public var authentication: Authentication

    public init(tls: TLS? = nil, authentication: Authentication = .none) {
        self.tls = tls
        self.authentication = authentication
    }

    /// nats-server's flags for these.
    var arguments: [String] {
        var arguments: [String] = []
        if let tls {
            arguments += ["--tls", "--tlscert", tls.certificateFile, "--tlskey", tls.keyFile]
            if let clientCAFile = tls.clientCAFile { arguments += ["--tlsverify", "--tlscacert", clientCAFile] }
        }
        switch authentication {
        case .none: break
        case .user(let user, let password): arguments += ["--user", user, "--pass", password]
        case .token(let token): arguments += ["--auth", token]
        case .configFile(let path): arguments += ["-c", path]
        }
        return arguments
    }
}
