import ArgumentParser
import Glibc
import PushClient
import PushEventLoop
import PushGateway
import PushSecurity
import PushService
import PushSession

struct GatewayCommand: ParsableCommand {
    /// The defaults the help shows; the keys play no part in them.
    private static let defaults: GatewayConfiguration = {
        let key = SecretKey(bytes: [UInt8](repeating: 0, count: SecretKey.byteCount))!
        return GatewayConfiguration(serverKey: key, providerKey: key)
    }()

    static let configuration = CommandConfiguration(
        commandName: "gateway",
        abstract: "Run the push gateway.",
        discussion: (ConfigSchema.helpText(for: .gateway) + ["README.md (\"The config file\") describes them too."]).joined(separator: "\n"))

    @Option(help: ArgumentHelp("The deployment directory made by `securepush init`; its securepush.conf holds the settings not given as flags.",
                               valueName: "dir"))
    var dataDir: String
    @Option(help: ArgumentHelp("Address to listen on; port 0 picks a free port (default: gateway.listen in the config file, which `securepush init` sets to 127.0.0.1:7071).",
                               valueName: "host:port"))
    var listen: HostPort?
    @Option(help: ArgumentHelp("TLS certificate, PEM (default: none, plain TCP).", valueName: "file")) var tlsCert: String?
    @Option(help: ArgumentHelp("TLS private key, PEM (default: none, plain TCP).", valueName: "file")) var tlsKey: String?
    @Option(help: ArgumentHelp("""
        Serve HTTP at this address: /metrics (Prometheus text format), /healthz (200 while the gateway runs) and \
        /readyz (200 when serving; 503 with the reason while draining, or until the device registry is loaded with \
        --store) (default: gateway.metrics in the config file; \
        none without it).
        """, valueName: "host:port"))
    var metrics: HostPort?
    @Option(help: ArgumentHelp("""
        The store whose device registry the gateway follows: only devices enrolled there (`securepush device enroll`) \
        connect, a revoked one is closed within seconds, and pushes are queued for enrolled devices that are offline; \
        device and provider HELLOs get BUSY until the registry is loaded (default: gateway.store in the config file; without it, any \
        registration signed with the server key is accepted, which is for tests and development). Several stores over \
        one database may be given as HOST:PORT,HOST:PORT: the gateway follows the registry through one of them and moves \
        to the next, from where it was, when that one fails.
        """, valueName: "host:port"), transform: parseStoreAddresses)
    var store: AddressList?
    @Option(help: ArgumentHelp("CA certificate (PEM) to verify the store's TLS certificate with; without it the connection to the store is plain TCP (default: none).",
                               valueName: "file"))
    var storeCaFile: String?
    @Option(help: ArgumentHelp("The name to verify the store's certificate against (default: the host of the --store address connected to).",
                               valueName: "name"))
    var storeServerName: String?
    @Option(help: ArgumentHelp("""
        Join a gateway cluster through this NATS server (JetStream on: nats-server -js), or several, comma-separated: \
        devices may connect to any node, a PUSH to any node reaches every target wherever it is connected, and offline \
        devices' queues are kept in JetStream; tls://host:port, or --nats-ca, connects over TLS, and credentials go in \
        the --nats-* files, never in the URL (default: gateway.cluster in the config file; without it, the gateway runs \
        alone with its queues in memory).
        """, valueName: "nats://host:port"))
    var cluster: String?
    @Option(help: ArgumentHelp("This gateway's name in its cluster, unique there: letters, digits, '-' and '_' (default: gateway.node in the config file, else the host name and the listen port).",
                               valueName: "name"))
    var node: String?
    @Option(help: ArgumentHelp("Most admitted peers (past HELLO_OK) at once; a HELLO beyond it gets ERROR BUSY (default: \(GatewayCommand.defaults.limits.maxConnections)).",
                               valueName: "count"))
    var maxConnections: Int?
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup(title: "Secured links to NATS (cluster nodes)") var nats: NATSLinkOptions
    @Option(help: ArgumentHelp("""
        Event-loop threads: each accepts connections and serves the devices whose id hashes to it, and a PUSH reaches \
        the others' devices through them; 0 runs one per core (default: gateway.loops in the config file, else 0). On a \
        cluster node each loop joins the cluster as a member NODE~K of its own.
        """, valueName: "count"))
    var loops: Int?
    @Option(help: ArgumentHelp("Pushes queued per offline device; past it the oldest is dropped and the device told with MISSED (default: \(GatewayCommand.defaults.queueCapacity)).",
                               valueName: "count"))
    var queueCapacity: Int?
    @Option(help: ArgumentHelp("Bytes of pushes written to a device and not yet acknowledged, at most (the rest wait in its queue), and of output a connection may leave unread before it is cut off as a slow consumer, with GOAWAY SLOW_CONSUMER (default: \(GatewayCommand.defaults.maxOutputBytes)).",
                               valueName: "bytes"))
    var maxOutputBytes: Int?
    @Option(help: ArgumentHelp("Pushes written to a device and not yet acknowledged (DELIVERY_ACK), at most, within --max-output-bytes of them; the others wait in its queue until acknowledgements free room, and what its full queue drops is told to the device at once with MISSED (default: \(GatewayCommand.defaults.deliveryWindow)).",
                               valueName: "count"))
    var deliveryWindow: Int?
    @Option(help: ArgumentHelp("Milliseconds pushes and MISSED may wait in a device's output with the device taking no byte of it (it has stopped reading) before it is closed with GOAWAY SLOW_CONSUMER and its unacknowledged pushes go back to its queue; 0 turns this off (default: \(GatewayCommand.defaults.outputStallMs)).",
                               valueName: "ms"))
    var outputStallMs: Int?
    @Option(help: ArgumentHelp("Ids of PUSHes with once 1 each loop remembers for 300 s, to answer a repeat with the first one's counts instead of delivering it again; past it the oldest is forgotten first (default: \(GatewayCommand.defaults.onceMemory)).",
                               valueName: "count"))
    var onceMemory: Int?
    @Option(name: .customLong("max-push-ttl-s"),
            help: ArgumentHelp("Longest a push waits for an offline device, in seconds: a PUSH asking longer is kept this long; on a cluster also how long JetStream keeps a queue record not written since (default: \(GatewayCommand.defaults.settings.maxPushTTLSeconds)).",
                               valueName: "seconds"))
    var maxPushTTL: UInt32?
    @Option(help: ArgumentHelp("Keepalive in milliseconds (0 turns it off); silent peers are closed after 1.5 times this (default: \(GatewayCommand.defaults.limits.keepaliveMs)).",
                               valueName: "ms"))
    var keepaliveMs: UInt32?
    @Option(help: ArgumentHelp("Least severe log level written (default: info, or gateway.log_level or log_level in the config file).",
                               valueName: "level"))
    var logLevel: LogLevelOption?
    @Option(help: ArgumentHelp("Log line format on stderr; json writes one object per line with timestamp, level, label, message and metadata (default: text, or gateway.log_format or log_format in the config file).",
                               valueName: "format"))
    var logFormat: LogFormatOption?

    func validate() throws {
        if let queueCapacity, queueCapacity < 1 { throw ValidationError("--queue-capacity must be at least 1") }
        if let maxOutputBytes, maxOutputBytes < 1024 { throw ValidationError("--max-output-bytes must be at least 1024") }
        if let deliveryWindow, deliveryWindow < 1 { throw ValidationError("--delivery-window must be at least 1") }
        if let outputStallMs, !(0...3_600_000).contains(outputStallMs) { throw ValidationError("--output-stall-ms must be 0 (off) to 3600000") }
        if let onceMemory, onceMemory < 1 { throw ValidationError("--once-memory must be at least 1") }
        if let maxPushTTL, maxPushTTL < 1 { throw ValidationError("--max-push-ttl-s must be at least 1") }
        if let loops, !(0...GatewayConfiguration.maxLoops).contains(loops) {
            throw ValidationError("--loops must be 0 (one per core) to \(GatewayConfiguration.maxLoops)")
        }
        // One line and exit 1, as the same mistake in the config file (gateway.cluster,
        // gateway.node) is reported: the value is wrong, not the command line's shape.
        if let cluster, let problem = ConfigSchema.natsURLListProblem(cluster) { throw CommandFailure("--cluster: \(problem)") }
        if let node, let problem = ConfigSchema.nodeNameProblem(node) { throw CommandFailure("--node: \(problem)") }
    }

    /// The cluster to join, from the flags or the config file; nil to run alone.
    private func clusterConfiguration(_ deployment: Deployment, port: Int) throws -> ClusterConfiguration? {
        guard let servers = cluster ?? deployment.config["gateway.cluster"] else {
            if node != nil { throw CommandFailure("--node needs --cluster (or gateway.cluster in the config file)") }
            _ = try nats.security(config: deployment.config, clustered: false)
            return nil
        }
        let name = node ?? deployment.config["gateway.node"] ?? GatewayCommand.defaultNodeName(port: port)
        var configuration = ClusterConfiguration(servers: servers.split(separator: ",").map(String.init), node: name)
        if let problem = configuration.problem { throw CommandFailure(problem) }
        if let security = try nats.security(config: deployment.config, clustered: true) { configuration.security = security }
        do {
            try configuration.checkNATSAccess()
        } catch {
            throw CommandFailure("\(error)")
        }
        return configuration
    }

    /// The host name and the listen port, made a valid node name.
    private static func defaultNodeName(port: Int) -> String {
        var buffer = [UInt8](repeating: 0, count: 256)
        let host = gethostname(&buffer, buffer.count - 1) == 0
            ? String(decoding: buffer.prefix { $0 != 0 }, as: UTF8.self) : "gateway"
        let cleaned = String(host.map { $0.isLetter || $0.isNumber || $0 == "-" ? $0 : "_" }.prefix(50))
        return "\(cleaned.isEmpty ? "gateway" : cleaned)-\(port)"
    }

    func run() throws {
        let deployment = try openDeployment(dataDir)
        guard let address = listen ?? deployment.config["gateway.listen"].flatMap(HostPort.init(argument:)) else {
            throw CommandFailure("no address to listen on: pass --listen HOST:PORT")
        }
        let monitoring = try monitoringAddress(metrics, service: .gateway, deployment: deployment)
        var configuration = GatewayConfiguration(deployment: deployment, host: address.host, port: address.port)
        configuration.tls = try loadServerTLS(certificate: tlsCert, key: tlsKey)
        configuration.logger = serviceLogger(.gateway, deployment: deployment, level: logLevel, format: logFormat)
        if let queueCapacity { configuration.queueCapacity = queueCapacity }
        if let maxOutputBytes { configuration.maxOutputBytes = maxOutputBytes }
        if let deliveryWindow { configuration.deliveryWindow = deliveryWindow }
        if let onceMemory { configuration.onceMemory = onceMemory }
        if let outputStallMs { configuration.outputStallMs = Int64(outputStallMs) }
        if let maxPushTTL { configuration.settings.maxPushTTLSeconds = maxPushTTL }
        if let maxConnections { configuration.limits.maxConnections = maxConnections }
        configuration.loops = loops ?? deployment.integer("loops", for: .gateway) ?? 0
        connection.apply(to: &configuration.limits)
        if let keepaliveMs { configuration.limits.keepaliveMs = keepaliveMs }
        if let store {
            configuration.store = ServerLink.Endpoint(store)
        } else if let text = deployment.config["gateway.store"] {
            // Read here as a list too (the library's configuration takes one address).
            do {
                configuration.store = ServerLink.Endpoint(try AddressList(parsing: text))
            } catch {
                throw CommandFailure("\(deployment.directory)/\(Deployment.configFile): gateway.store: \(error)")
            }
        }
        if var followed = configuration.store {
            if let storeCaFile {
                do {
                    followed.tls = try TLSContext.client(caFile: storeCaFile)
                } catch {
                    throw CommandFailure("cannot use --store-ca-file: \(error)")
                }
            }
            followed.serverName = storeServerName
            configuration.store = followed
        } else if storeCaFile != nil || storeServerName != nil {
            throw CommandFailure("--store-ca-file and --store-server-name need --store (or gateway.store in the config file)")
        }

        // Port 0 picks a port at listen time; the default node name then uses a random one.
        configuration.cluster = try clusterConfiguration(deployment, port: address.port == 0 ? Int.random(in: 1...65535) : address.port)

        let loop = try EventLoop()
        let service: GatewayLoops
        do {
            service = try GatewayLoops.start(configuration, on: loop)
        } catch {
            throw CommandFailure(error.description)
        }
        try serveUntilStopped(service, on: loop, listen: address, monitoring: monitoring, logger: configuration.logger,
                              placement: "each device is served by the one its id hashes to")
    }
}
