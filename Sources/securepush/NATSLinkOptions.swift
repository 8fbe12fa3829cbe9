import ArgumentParser
import Glibc
import PushNATS
import PushSecurity

/// How a cluster node secures its links to NATS: TLS with a CA (and a client certificate),
/// and one kind of credentials, each read from a file so no secret is on the command line.
/// Each flag wins over its `gateway.nats_*` key.
struct NATSLinkOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Connect to NATS over TLS, trusting server certificates this CA file (PEM) signed (default: gateway.nats_ca in the config file; unset, plain TCP unless a --cluster URL says tls://).",
                               valueName: "file"))
    var natsCa: String?
    @Option(help: ArgumentHelp("This node's client certificate (PEM) for NATS servers that verify clients; needs --nats-key and --nats-ca (default: gateway.nats_cert).",
                               valueName: "file"))
    var natsCert: String?
    @Option(help: ArgumentHelp("The private key (PEM) of --nats-cert (default: gateway.nats_key).", valueName: "file"))
    var natsKey: String?
    @Option(help: ArgumentHelp("The name the NATS server's certificate must carry; needs --nats-ca (default: gateway.nats_server_name, else the host of the --cluster URL connected to).",
                               valueName: "name"))
    var natsServerName: String?
    @Option(help: ArgumentHelp("Authenticate to NATS as this user; needs --nats-password-file (default: gateway.nats_user).", valueName: "user"))
    var natsUser: String?
    @Option(help: ArgumentHelp("An owner-only file whose first line is --nats-user's password (default: gateway.nats_password_file).",
                               valueName: "file"))
    var natsPasswordFile: String?
    @Option(help: ArgumentHelp("Authenticate to NATS with the token on the first line of this owner-only file (default: gateway.nats_token_file).",
                               valueName: "file"))
    var natsTokenFile: String?
    @Option(help: ArgumentHelp("Authenticate to NATS with this owner-only NATS credentials file: a user JWT and its nkey seed, as nsc writes it (default: gateway.nats_credentials).",
                               valueName: "file"))
    var natsCredentials: String?

    /// Each setting: the flag, else the config key.
    private struct Settings {
        var ca, cert, key, serverName, user, passwordFile, tokenFile, credentials: String?

        var isEmpty: Bool {
            [ca, cert, key, serverName, user, passwordFile, tokenFile, credentials].allSatisfy { $0 == nil }
        }
    }

    private func settings(_ config: [String: String]) -> Settings {
        Settings(ca: natsCa ?? config["gateway.nats_ca"], cert: natsCert ?? config["gateway.nats_cert"],
                 key: natsKey ?? config["gateway.nats_key"], serverName: natsServerName ?? config["gateway.nats_server_name"],
                 user: natsUser ?? config["gateway.nats_user"], passwordFile: natsPasswordFile ?? config["gateway.nats_password_file"],
                 tokenFile: natsTokenFile ?? config["gateway.nats_token_file"],
                 credentials: natsCredentials ?? config["gateway.nats_credentials"])
    }

    /// What the flags and `config` ask for, the files checked and the secrets read; nil
    /// when nothing is set. `clustered`: whether the gateway joins a cluster at all.
    func security(config: [String: String], clustered: Bool) throws -> NATSSecurity? {
        let chosen = settings(config)
        guard !chosen.isEmpty else { return nil }
        guard clustered else { throw CommandFailure("the --nats-* settings need --cluster (or gateway.cluster in the config file)") }
        return NATSSecurity(tls: try tls(chosen), credentials: try credentials(chosen))
    }

    private func tls(_ chosen: Settings) throws -> NATSSecurity.TLS? {
        guard let ca = chosen.ca else {
            if chosen.cert != nil || chosen.key != nil || chosen.serverName != nil {
                throw CommandFailure("--nats-cert, --nats-key and --nats-server-name need --nats-ca (or gateway.nats_ca), the CA that signed the NATS server's certificate")
            }
            return nil
        }
        if (chosen.cert == nil) != (chosen.key == nil) {
            throw CommandFailure("--nats-cert and --nats-key (gateway.nats_cert and gateway.nats_key) go together")
        }
        try NATSSecretFile.checkReadable(ca, what: "the NATS CA file")
        if let cert = chosen.cert, let key = chosen.key {
            try NATSSecretFile.checkReadable(cert, what: "the NATS client certificate")
            // Like --tls-key, a key may be shared with a group (Debian's ssl-cert): its mode is not checked.
            try NATSSecretFile.checkReadable(key, what: "the NATS client key")
        }
        return NATSSecurity.TLS(caFile: ca, certificateFile: chosen.cert, keyFile: chosen.key, serverName: chosen.serverName)
    }

    private func credentials(_ chosen: Settings) throws -> NATSSecurity.Credentials {
        let kinds = [chosen.user != nil || chosen.passwordFile != nil, chosen.tokenFile != nil, chosen.credentials != nil]
        guard kinds.filter({ $0 }).count <= 1 else {
            throw CommandFailure("""
                NATS credentials of one kind only: --nats-user with --nats-password-file, --nats-token-file, or \
                --nats-credentials (flags and gateway.nats_* keys together)
                """)
        }
        if let user = chosen.user {
            guard let passwordFile = chosen.passwordFile else {
                throw CommandFailure("--nats-user needs --nats-password-file (or gateway.nats_password_file): a password never goes on the command line")
            }
            return .user(user, password: try NATSSecretFile.firstLine(passwordFile, what: "the NATS password file"))
        }
        if chosen.passwordFile != nil { throw CommandFailure("--nats-password-file needs --nats-user (or gateway.nats_user)") }
        if let tokenFile = chosen.tokenFile {
            return .token(try NATSSecretFile.firstLine(tokenFile, what: "the NATS token file"))
        }
        if let credentials = chosen.credentials {
            try NATSSecretFile.checkOwnerOnly(credentials, what: "the NATS credentials file")
            return .credentialsFile(credentials)
        }
        return .none
    }
}
