import ArgumentParser
import PushClient
import PushEventLoop
import PushSecurity
import PushService
import PushSession
import PushStore
import PushStoreLogic

struct StoreCommand: ParsableCommand {
    private static let settings = StoreSettings()
    private static let limits = ServiceLimits(name: "", served: [])

    static let configuration = CommandConfiguration(
        commandName: "store",
        abstract: "Run the payload store.",
        discussion: (ConfigSchema.helpText(for: .store) + ["README.md (\"The config file\") describes them too."]).joined(separator: "\n"))

    @Option(help: ArgumentHelp("The deployment directory made by `securepush init`; its securepush.conf holds the settings not given as flags.",
                               valueName: "dir"))
    var dataDir: String
    @Option(help: ArgumentHelp("Address to listen on; port 0 picks a free port (default: store.listen in the config file, which `securepush init` sets to 127.0.0.1:7070).",
                               valueName: "host:port"))
    var listen: HostPort?
    @Option(help: ArgumentHelp("""
        Keep the data in this PostgreSQL database, which any number of stores can share; its tables are created or \
        brought up to date at start (default: store.database in the config file, else the SQLite file store.sqlite in \
        the deployment directory). \(ConfigSchema.databaseURLNote)
        """, valueName: "postgresql://..."))
    var database: String?
    @Option(help: ArgumentHelp("TLS certificate, PEM (default: none, plain TCP).", valueName: "file")) var tlsCert: String?
    @Option(help: ArgumentHelp("TLS private key, PEM (default: none, plain TCP).", valueName: "file")) var tlsKey: String?
    @Option(help: ArgumentHelp("""
        Serve the HTTP provider API at this address: POST /v1/messages sends (as SEND does), GET and DELETE \
        /v1/messages/ID report and recall, GET /v1/recipients/NAME/keys reads a recipient's device keys (as KEYS \
        does); requests carry an API token from `securepush provider token create` \
        (default: store.http in the config file; none without it). With --tls-cert it serves HTTPS. A head RFC 9112 \
        refuses (two Content-Lengths or one not digits alone, Transfer-Encoding other than chunked alone or with \
        Content-Length, HTTP/1.1 without Host, two Hosts or Authorizations, obs-fold, a space before a colon) gets 400 \
        and the connection is closed; Expect: 100-continue gets its 100 Continue only once the token has been checked \
        (else 401, or 413 over the size limit, without the body being read).
        """, valueName: "host:port"))
    var http: HostPort?
    @Option(help: ArgumentHelp("Most open HTTP API connections at once, apart from --max-connections (default: \(StoreHTTPConfiguration.defaultMaxConnections), or store.http_max_connections in the config file).",
                               valueName: "count"))
    var httpMaxConnections: Int?
    @Option(help: ArgumentHelp("Most open HTTP API connections from one client address at once, so that one address cannot take every place; one more from it is answered 503 and closed (default: \(StoreHTTPConfiguration.defaultMaxConnectionsPerAddress), or store.http_max_connections_per_address in the config file). Behind a proxy every request comes from its address: raise it.",
                               valueName: "count"))
    var httpMaxConnectionsPerAddress: Int?
    @Option(help: ArgumentHelp("An HTTP API request must arrive whole within this long of its connection opening or of the previous response; also the keep-alive idle limit (default: 10000, or store.http_request_timeout_ms in the config file).",
                               valueName: "ms"))
    var httpRequestTimeoutMs: Int?
    @Option(help: ArgumentHelp("""
        Serve HTTP at this address: /metrics (Prometheus text format), /healthz (200 while the store runs) and \
        /readyz (200 when serving; 503 with the reason while draining or when the data directory cannot take writes) \
        (default: store.metrics in the config file; none without it).
        """, valueName: "host:port"))
    var metrics: HostPort?
    @Option(help: ArgumentHelp("Most admitted peers (past HELLO_OK) at once; a HELLO beyond it gets ERROR BUSY (default: \(StoreCommand.limits.maxConnections)).",
                               valueName: "count"))
    var maxConnections: Int?
    @Option(help: ArgumentHelp("""
        Hand the pushes of SENDs to this gateway, connecting as a provider; several nodes of one cluster may be given \
        as HOST:PORT,HOST:PORT, used one at a time (the next when one fails or answers BUSY). A SEND's payload and push are committed together and the push is \
        kept until a gateway has taken it, across restarts (default: store.gateway in the config file; without it, the \
        store refuses SEND and providers use STORE and PUSH).
        """, valueName: "host:port"), transform: parseGatewayAddresses)
    var gateway: AddressList?
    @Option(help: ArgumentHelp("CA certificate (PEM) to verify the gateway's TLS certificate with; without it the connection to the gateway is plain TCP (default: none).",
                               valueName: "file"))
    var gatewayCaFile: String?
    @Option(help: ArgumentHelp("The name to verify the gateway's certificate against (default: the host of the --gateway address connected to).",
                               valueName: "name"))
    var gatewayServerName: String?
    @OptionGroup var connection: ConnectionOptions
    @Option(help: ArgumentHelp("""
        Event-loop threads serving requests; connections are spread over them in turn and each serves its own whole. \
        On SQLite they share one writer thread; on PostgreSQL each opens its own connections. 0 runs one per core (default: store.loops in the \
        config file, else 0).
        """, valueName: "count"))
    var loops: Int?
    @Option(help: ArgumentHelp("Largest payload a STORE may carry, in bytes (default: \(StoreCommand.settings.maxPayloadBytes), or store.max_payload_bytes in the config file).",
                               valueName: "bytes"))
    var maxPayload: Int?
    @Option(help: ArgumentHelp("Fetch token lifetime, in seconds (default: \(StoreCommand.settings.tokenLifetimeMs / 1000), or store.token_lifetime_s in the config file).",
                               valueName: "seconds"))
    var tokenLifetime: Int?
    @Option(help: ArgumentHelp("Keepalive in milliseconds (0 turns it off); silent peers are closed after 1.5 times this (default: \(StoreCommand.limits.keepaliveMs)).",
                               valueName: "ms"))
    var keepaliveMs: UInt32?
    @Option(help: ArgumentHelp("Least severe log level written (default: info, or store.log_level or log_level in the config file).",
                               valueName: "level"))
    var logLevel: LogLevelOption?
    @Option(help: ArgumentHelp("Log line format on stderr; json writes one object per line with timestamp, level, label, message and metadata (default: text, or store.log_format or log_format in the config file).",
                               valueName: "format"))
    var logFormat: LogFormatOption?

    func validate() throws {
        if let loops, !(0...StoreConfiguration.maxLoops).contains(loops) {
            throw ValidationError("--loops must be 0 (one per core) to \(StoreConfiguration.maxLoops)")
        }
    }

    func run() throws {
        let deployment = try openDeployment(dataDir)
        guard let address = listen ?? deployment.config["store.listen"].flatMap(HostPort.init(argument:)) else {
            throw CommandFailure("no address to listen on: pass --listen HOST:PORT")
        }
        let monitoring = try monitoringAddress(metrics, service: .store, deployment: deployment)
        var configuration = StoreConfiguration(deployment: deployment, host: address.host, port: address.port)
        if let database {
            if let problem = ConfigSchema.databaseURLProblem(database) { throw CommandFailure("--database: \(problem)") }
            configuration.database = database
        }
        configuration.tls = try loadServerTLS(certificate: tlsCert, key: tlsKey)
        configuration.logger = serviceLogger(.store, deployment: deployment, level: logLevel, format: logFormat)
        if let maxPayload { configuration.settings.maxPayloadBytes = maxPayload }
        if let tokenLifetime { configuration.settings.tokenLifetimeMs = UInt64(max(0, tokenLifetime)) * 1000 }
        if let maxConnections { configuration.limits.maxConnections = maxConnections }
        connection.apply(to: &configuration.limits)
        if let keepaliveMs { configuration.limits.keepaliveMs = keepaliveMs }
        configuration.loops = loops ?? deployment.integer("loops", for: .store) ?? 0
        configuration.gateway = try gatewayEndpoint(deployment)
        if let address = try httpAddress(deployment) {
            var http = StoreHTTPConfiguration(host: address.host, port: address.port)
            if let count = httpMaxConnections ?? deployment.integer("http_max_connections", for: .store) {
                guard count > 0 else { throw CommandFailure("--http-max-connections must be above 0") }
                http.maxConnections = count
            }
            if let count = httpMaxConnectionsPerAddress ?? deployment.integer("http_max_connections_per_address", for: .store) {
                guard count > 0 else { throw CommandFailure("--http-max-connections-per-address must be above 0") }
                http.maxConnectionsPerAddress = count
            }
            if let ms = httpRequestTimeoutMs ?? deployment.integer("http_request_timeout_ms", for: .store) {
                guard ms >= 100 else { throw CommandFailure("--http-request-timeout-ms must be 100 or more") }
                http.limits.requestDeadline = .milliseconds(ms)
            }
            // A body holds the payload in base64, with room for the other members.
            http.limits.maxBodyBytes = configuration.settings.maxPayloadBytes / 3 * 4 + 8 * 1024
            configuration.http = http
        }

        let loop = try EventLoop()
        let service: StoreLoops
        do {
            service = try StoreLoops.start(configuration, on: loop)
        } catch {
            throw CommandFailure(error.description)
        }
        if let port = service.first.httpPort, let http = configuration.http {
            announce("http api on \(HostPort(host: http.host, port: port))")
        }
        try serveUntilStopped(service, on: loop, listen: address, monitoring: monitoring, logger: configuration.logger,
                              placement: "each new connection goes to the next loop in turn, which serves all its requests")
    }
}

extension StoreCommand {
    /// `--http` or `store.http`.
    func httpAddress(_ deployment: Deployment) throws -> HostPort? {
        if let http { return http }
        guard let text = deployment.config["store.http"] else { return nil }
        guard let address = HostPort(argument: text) else {
            throw CommandFailure("\(deployment.directory)/\(Deployment.configFile): store.http must be HOST:PORT, not '\(text)'")
        }
        return address
    }

    /// `--gateway` or `store.gateway`, with its TLS settings.
    func gatewayEndpoint(_ deployment: Deployment) throws -> ServerLink.Endpoint? {
        var addresses = gateway
        if addresses == nil, let text = deployment.config["store.gateway"] {
            do {
                addresses = try AddressList(parsing: text)
            } catch {
                throw CommandFailure("\(deployment.directory)/\(Deployment.configFile): store.gateway: \(error)")
            }
        }
        guard let addresses else {
            if gatewayCaFile != nil || gatewayServerName != nil {
                throw CommandFailure("--gateway-ca-file and --gateway-server-name need --gateway (or store.gateway in the config file)")
            }
            return nil
        }
        var endpoint = ServerLink.Endpoint(addresses)
        if let gatewayCaFile {
            do {
                endpoint.tls = try TLSContext.client(caFile: gatewayCaFile)
            } catch {
                throw CommandFailure("cannot use --gateway-ca-file: \(error)")
            }
        }
        endpoint.serverName = gatewayServerName
        return endpoint
    }
}

func loadServerTLS(certificate: String?, key: String?) throws -> TLSContext? {
    switch (certificate, key) {
    case (nil, nil): return nil
    case (let certificate?, let key?):
        do {
            return try TLSContext.server(certificateFile: certificate, privateKeyFile: key)
        } catch {
            throw CommandFailure("TLS: \(error)")
        }
    default:
        throw CommandFailure("--tls-cert and --tls-key go together")
    }
}
