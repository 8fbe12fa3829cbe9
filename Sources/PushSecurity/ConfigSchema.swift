import PushWire

/// A service that reads the deployment's config file.
public enum ConfigService: String, CaseIterable, Sendable {
    case store, gateway
}

/// One key the deployment's config file (`DIR/securepush.conf`) accepts.
public struct ConfigKey: Sendable {
    /// What a value must look like.
    public enum Kind: Sendable, Equatable {
        /// `HOST:PORT`, an IPv6 host in brackets; port 0 picks a free port.
        case address
        /// One `HOST:PORT` or several, comma-separated, each checked as `address`.
        case addressList
        case integer(ClosedRange<Int>)
        case choice([String])
        /// A PostgreSQL connection URI (`postgresql://` or `postgres://`).
        case databaseURL
        /// One `nats://HOST:PORT` or several, comma-separated.
        case natsURLList
        /// A cluster node's name: 1 to 64 letters, digits, `-` or `_`.
        case nodeName
        /// A file named by its absolute path: a relative one would depend on the directory
        /// the service happens to be started in.
        case absolutePath
        /// One word of printable characters, no whitespace (a user or host name).
        case word
    }

    /// The name as written; for a shared key, the bare name (`handshake_timeout_ms`).
    public let name: String
    public let kind: Kind
    /// The value in effect when the key is absent, as it would be written; nil when the
    /// absence turns the feature off.
    public let defaultValue: String?
    /// What to show in the default config for a key with no default.
    public let example: String?
    /// A unit or note shown after the range (`ms`, `bytes`).
    public let unit: String?
    /// One line: what the key sets.
    public let summary: String
    /// The services whose help lists it.
    public let services: [ConfigService]
    /// Also accepted as `SERVICE.name` for each of `services`; the bare key sets them all
    /// and a prefixed one wins for its service.
    public let shared: Bool
    /// The command-line flag that wins over the key, if there is one.
    public let flag: String?
    /// Written as an active line (not a comment) in the default config of `securepush init`.
    public let inTemplate: Bool

    init(_ name: String, _ kind: Kind, default defaultValue: String?, example: String? = nil, unit: String? = nil,
         _ summary: String, services: [ConfigService], shared: Bool = false, flag: String? = nil, inTemplate: Bool = false) {
        self.name = name
        self.kind = kind
        self.defaultValue = defaultValue
        self.example = example
        self.unit = unit
        self.summary = summary
        self.services = services
        self.shared = shared
        self.flag = flag
        self.inTemplate = inTemplate
    }

    /// Every name the file accepts for this key.
    public var acceptedNames: [String] {
        shared ? [name] + services.map { $0.rawValue + "." + name } : [name]
    }

    /// How the key is named in `service`'s help and docs: `[store.]handshake_timeout_ms`
    /// for a shared key.
    public func displayName(for service: ConfigService? = nil) -> String {
        guard shared else { return name }
        if let service { return "[\(service.rawValue).]\(name)" }
        return "[store.|gateway.]\(name)"
    }

    /// The accepted values in words: `1 to 3600000 ms`, `text or json`, `HOST:PORT`.
    public var valueText: String {
        switch kind {
        case .address: return "HOST:PORT"
        case .addressList: return "HOST:PORT[,HOST:PORT...]"
        case .integer(let range):
            return "\(range.lowerBound) to \(range.upperBound)" + (unit.map { " " + $0 } ?? "")
        case .choice(let choices): return ConfigSchema.list(choices, conjunction: "or")
        case .databaseURL: return "postgresql://USER@HOST:PORT/DATABASE"
        case .natsURLList: return "nats://HOST:PORT[,tls://HOST:PORT...]"
        case .nodeName: return "NAME"
        case .absolutePath: return "/ABSOLUTE/PATH"
        case .word: return "NAME"
        }
    }
}

/// Every key the deployment's config file accepts: the one table that validation, the
/// default config of `securepush init`, `--help` and the README are made from.
public enum ConfigSchema {
    static let logLevels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]
    static let both: [ConfigService] = [.store, .gateway]
    /// Room a STORE frame needs beside its payload (the store raises its frame limit by it).
    static let largestPayload = FrameLimits.ceiling - 1024

    /// How `store.database` and `--database` take the password and TLS: the same words in
    /// the config table, `init --help` and `store --help`.
    public static let databaseURLNote = """
        The URL is libpq's: put the password in an owner-only password file named by passfile=ABSOLUTE-PATH \
        (lines HOST:PORT:DATABASE:USER:PASSWORD), not in the URL, and add sslmode=require over TCP.
        """

    public static let keys: [ConfigKey] = [
        ConfigKey("store.listen", .address, default: "127.0.0.1:7070",
                  "Address the store listens on.", services: [.store], flag: "--listen", inTemplate: true),
        ConfigKey("gateway.listen", .address, default: "127.0.0.1:7071",
                  "Address the gateway listens on.", services: [.gateway], flag: "--listen", inTemplate: true),
        ConfigKey("gateway.store", .addressList, default: nil, example: "127.0.0.1:7070",
                  "Follow this store's device registry (several stores over one database, comma-separated, are tried in order): only enrolled devices connect, and pushes are queued for enrolled devices that are offline.",
                  services: [.gateway], flag: "--store"),
        ConfigKey("store.gateway", .addressList, default: nil, example: "127.0.0.1:7071",
                  "Hand the pushes of SENDs to this gateway (several, comma-separated: nodes of one cluster, used one at a time, the next when one fails or answers BUSY); unset, the store refuses SEND.",
                  services: [.store], flag: "--gateway"),
        ConfigKey("gateway.cluster", .natsURLList, default: nil, example: "nats://127.0.0.1:4222",
                  "Join a gateway cluster through these NATS servers (JetStream on; tls:// URLs connect over TLS): devices may connect to any node, pushes reach them wherever they are, and offline queues are kept in JetStream; unset, the gateway runs alone with its queues in memory.",
                  services: [.gateway], flag: "--cluster"),
        ConfigKey("gateway.node", .nodeName, default: nil, example: "gateway-1",
                  "This gateway's name in its cluster, unique there (default: the host name and the listen port).",
                  services: [.gateway], flag: "--node"),
        ConfigKey("gateway.nats_ca", .absolutePath, default: nil, example: "/srv/push/nats-ca.pem",
                  "Connect to NATS over TLS, trusting the server certificates this CA file (PEM) signed; unset, plain TCP unless a URL says tls://.",
                  services: [.gateway], flag: "--nats-ca"),
        ConfigKey("gateway.nats_cert", .absolutePath, default: nil, example: "/srv/push/nats-client.pem",
                  "This node's client certificate (PEM) for NATS servers that verify clients; with gateway.nats_key and gateway.nats_ca.",
                  services: [.gateway], flag: "--nats-cert"),
        ConfigKey("gateway.nats_key", .absolutePath, default: nil, example: "/srv/push/nats-client.key",
                  "The private key (PEM) of gateway.nats_cert.",
                  services: [.gateway], flag: "--nats-key"),
        ConfigKey("gateway.nats_server_name", .word, default: nil, example: "nats.example",
                  "The name the NATS server's certificate must carry (default: the host of the gateway.cluster URL connected to).",
                  services: [.gateway], flag: "--nats-server-name"),
        ConfigKey("gateway.nats_user", .word, default: nil, example: "gateway",
                  "Authenticate to NATS as this user, with the password in gateway.nats_password_file.",
                  services: [.gateway], flag: "--nats-user"),
        ConfigKey("gateway.nats_password_file", .absolutePath, default: nil, example: "/srv/push/nats.password",
                  "An owner-only file whose first line is gateway.nats_user's NATS password.",
                  services: [.gateway], flag: "--nats-password-file"),
        ConfigKey("gateway.nats_token_file", .absolutePath, default: nil, example: "/srv/push/nats.token",
                  "Authenticate to NATS with the token on the first line of this owner-only file (instead of a user).",
                  services: [.gateway], flag: "--nats-token-file"),
        ConfigKey("gateway.nats_credentials", .absolutePath, default: nil, example: "/srv/push/gateway.creds",
                  "Authenticate to NATS with this owner-only NATS credentials file (a user JWT and its nkey seed, as nsc writes it; instead of a user or token).",
                  services: [.gateway], flag: "--nats-credentials"),
        ConfigKey("store.database", .databaseURL, default: nil, example: "postgresql://securepush@localhost:5432/securepush?sslmode=require&passfile=/srv/push/pgpass",
                  "Keep the store's data in this PostgreSQL database, which any number of stores can share; unset, in the SQLite file store.sqlite in the deployment directory. " + databaseURLNote,
                  services: [.store], flag: "--database"),
        ConfigKey("store.http", .address, default: nil, example: "127.0.0.1:8080",
                  "Serve the HTTP provider API (POST /v1/messages, GET and DELETE /v1/messages/{id}, GET /v1/recipients/{name}/keys) at this address, with the store's TLS certificate when it has one; requests authenticate with API tokens (`securepush provider token create`).",
                  services: [.store], flag: "--http"),
        ConfigKey("store.http_max_connections", .integer(1...100_000), default: "1024",
                  "Most open HTTP API connections at once, apart from the protocol's own limit; one more is answered 503 and closed.",
                  services: [.store], flag: "--http-max-connections"),
        ConfigKey("store.http_max_connections_per_address", .integer(1...100_000), default: "256",
                  "Most open HTTP API connections from one client address at once, so that one address cannot take every place; one more from it is answered 503 and closed. Raise it behind a proxy.",
                  services: [.store], flag: "--http-max-connections-per-address"),
        ConfigKey("store.http_request_timeout_ms", .integer(100...600_000), default: "10000", unit: "ms",
                  "An HTTP API request must arrive whole within this long of its connection opening or of the previous response, or the connection is closed; also how long an idle keep-alive connection stays open.",
                  services: [.store], flag: "--http-request-timeout-ms"),
        ConfigKey("store.metrics", .address, default: nil, example: "127.0.0.1:9101",
                  "Serve /metrics, /healthz and /readyz over HTTP at this address.", services: [.store], flag: "--metrics"),
        ConfigKey("gateway.metrics", .address, default: nil, example: "127.0.0.1:9100",
                  "Serve /metrics, /healthz and /readyz over HTTP at this address.", services: [.gateway], flag: "--metrics"),
        ConfigKey("log_level", .choice(logLevels), default: "info",
                  "Least severe log line written to stderr.", services: both, shared: true, flag: "--log-level"),
        ConfigKey("log_format", .choice(["text", "json"]), default: "text",
                  "Log lines as text, or as one JSON object each for log shippers.", services: both, shared: true,
                  flag: "--log-format"),
        ConfigKey("store.max_payload_bytes", .integer(1...largestPayload), default: "4096", unit: "bytes",
                  "Largest payload a STORE may carry.", services: [.store], flag: "--max-payload", inTemplate: true),
        ConfigKey("store.token_lifetime_s", .integer(1...31_536_000), default: "3600", unit: "s",
                  "Lifetime of a fetch token from LOGIN.", services: [.store], flag: "--token-lifetime", inTemplate: true),
        ConfigKey("store.bad_tokens_per_address", .integer(1...1_000_000), default: "20",
                  "BAD_TOKEN answers one client address may get in 10 s before its requests are RATE_LIMITED.",
                  services: [.store]),
        ConfigKey("password.iterations", .integer(1_000...100_000_000), default: "\(PasswordHash.defaultIterations)",
                  "PBKDF2-HMAC-SHA256 iterations for new password hashes (`securepush user add`).",
                  services: [.store], inTemplate: true),
        ConfigKey("store.max_connections", .integer(1...1_000_000), default: "10000",
                  "Most admitted peers (past HELLO_OK) at once; one more HELLO gets ERROR BUSY.",
                  services: [.store], flag: "--max-connections"),
        ConfigKey("gateway.max_connections", .integer(1...1_000_000), default: "20000",
                  "Most admitted peers (past HELLO_OK) at once; one more HELLO gets ERROR BUSY.",
                  services: [.gateway], flag: "--max-connections"),
        ConfigKey("gateway.loops", .integer(0...256), default: "0",
                  "Event-loop threads, each serving the devices whose id hashes to it (0: one per core).",
                  services: [.gateway], flag: "--loops"),
        ConfigKey("store.loops", .integer(0...256), default: "0",
                  "Event-loop threads serving requests, connections spread over them in turn (0: one per core). On SQLite they share one writer thread.",
                  services: [.store], flag: "--loops"),
        ConfigKey("store.outbox_lease_s", .integer(1...3600), default: "30", unit: "s",
                  "On PostgreSQL, how long a store keeps the pushes of its SENDs to itself before another store of the database may take over those no gateway has taken (a store that died, or cannot reach a gateway).",
                  services: [.store]),
        ConfigKey("store.keepalive_ms", .integer(0...86_400_000), default: "30000", unit: "ms",
                  "Keepalive offered in HELLO_OK (0 turns it off); a silent peer is closed after 1.5 times it.",
                  services: [.store], flag: "--keepalive-ms"),
        ConfigKey("gateway.keepalive_ms", .integer(0...86_400_000), default: "30000", unit: "ms",
                  "Keepalive offered in HELLO_OK (0 turns it off); a silent peer is closed after 1.5 times it.",
                  services: [.gateway], flag: "--keepalive-ms"),
        ConfigKey("gateway.queue_capacity", .integer(1...1_000_000), default: "100",
                  "Pushes queued per offline device; the oldest goes when it is full.",
                  services: [.gateway], flag: "--queue-capacity"),
        ConfigKey("gateway.max_output_bytes", .integer(1_024...1_073_741_824), default: "65536", unit: "bytes",
                  "Bytes of pushes written to a device and not yet acknowledged, at most (the rest wait in its queue), and of output a device may leave unread before it is cut off as a slow consumer.",
                  services: [.gateway], flag: "--max-output-bytes"),
        ConfigKey("gateway.delivery_window", .integer(1...65_536), default: "64",
                  "Pushes written to a device and not yet acknowledged, at most, within gateway.max_output_bytes of them; the rest wait in its queue.",
                  services: [.gateway], flag: "--delivery-window"),
        ConfigKey("gateway.output_stall_ms", .integer(0...3_600_000), default: "10000", unit: "ms",
                  "How long pushes and MISSED may wait in a device's output with the device taking no byte of it before it is closed with GOAWAY SLOW_CONSUMER (0 turns it off).",
                  services: [.gateway], flag: "--output-stall-ms"),
        ConfigKey("gateway.once_memory", .integer(1...10_000_000), default: "100000",
                  "Ids of PUSHes with once 1 each loop remembers for 300 s, to answer a repeat with the first counts.",
                  services: [.gateway], flag: "--once-memory"),
        ConfigKey("gateway.max_push_ttl_s", .integer(1...31_536_000), default: "2592000", unit: "s",
                  "Longest a push waits for an offline device: a PUSH asking longer is kept this long. On a cluster, also how long JetStream keeps a queue record not written since (the stream's max_age).",
                  services: [.gateway], flag: "--max-push-ttl-s"),
        ConfigKey("handshake_timeout_ms", .integer(1...3_600_000), default: "5000", unit: "ms",
                  "From accept to HELLO_OK; a slower peer gets GOAWAY TIMEOUT.", services: both, shared: true,
                  flag: "--handshake-timeout-ms"),
        ConfigKey("frame_timeout_ms", .integer(1...3_600_000), default: "10000", unit: "ms",
                  "From a frame's first byte to its last; a slower one gets GOAWAY TIMEOUT.", services: both, shared: true,
                  flag: "--frame-timeout-ms"),
        ConfigKey("max_pending_handshakes", .integer(1...1_000_000), default: "1024",
                  "Connections waiting for HELLO_OK at once; one more is closed unanswered.", services: both, shared: true,
                  flag: "--max-pending-handshakes"),
        ConfigKey("max_pending_per_address", .integer(1...1_000_000), default: "64",
                  "Connections from one source address waiting for HELLO_OK at once.", services: both, shared: true,
                  flag: "--max-pending-per-address"),
    ]

    /// The key a name in the file stands for, and the service its prefix names (nil for a
    /// bare shared key or a key of its own).
    public static func key(named name: String) -> (key: ConfigKey, service: ConfigService?)? {
        for key in keys {
            if key.name == name { return (key, nil) }
            if key.shared {
                for service in key.services where name == service.rawValue + "." + key.name { return (key, service) }
            }
        }
        return nil
    }

    /// The keys `service` reads, in table order.
    public static func keys(for service: ConfigService) -> [ConfigKey] {
        keys.filter { $0.services.contains(service) }
    }

    static func list(_ items: [String], conjunction: String) -> String {
        guard items.count > 1, let last = items.last else { return items.first ?? "" }
        return items.dropLast().joined(separator: ", ") + " \(conjunction) " + last
    }
}
