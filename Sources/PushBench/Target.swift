#if canImport(Glibc)
import Glibc
#endif
import PushSecurity
import PushEventLoop
import PushStore
import PushWire

/// Where the load goes: services started for the run (`embedded`, the default), or
/// running ones named by `store`/`gateway` together with their deployment directory.
public struct TargetOptions: Sendable {
    /// Running stores; the bench's connections are spread over them in turn.
    public var stores: [HostPort] = []
    /// Running gateways (the nodes of a cluster): devices and provider connections are
    /// spread over them in turn.
    public var gateways: [HostPort] = []
    /// The deployment directory of running services (its keys sign the bench's credentials).
    public var dataDirectory: String?
    /// An existing store user (with `passwordFile` when devices must LOGIN). Without it,
    /// a remote run adds a throwaway user with `securepush user add` and removes it after.
    public var user: String?
    public var passwordFile: String?
    /// The gateway process to read memory from in `connections`; found from its
    /// listening port when nil.
    public var gatewayPID: Int32?
    /// The `securepush` executable for child processes; nil means this process's own.
    public var executable: String?
    /// TLS to running services: verified against this context's CA, the certificate
    /// naming `serverName` (default: the host of each address).
    public var tls: TLSContext?
    public var serverName: String?
    /// Embedded services serve TLS with a self-signed certificate made for the run.
    public var embeddedTLS = false
    /// The embedded stores keep their data in this PostgreSQL database (`store.database`)
    /// instead of a SQLite file.
    public var database: String?
    /// Embedded store processes, all on `database` (more than one needs it).
    public var storeCount = 1
    /// Embedded gateway processes; above 1 they form a cluster over a nats-server the
    /// bench starts.
    public var gatewayCount = 1
    /// Run the embedded gateways as a cluster over nats-server even when there is one.
    public var cluster = false
    /// Loop threads per embedded gateway (`gateway --loops`); nil leaves the gateway's
    /// default, one per core.
    public var gatewayLoops: Int?
    /// Loop threads per embedded store (`store --loops`); nil leaves the store's default.
    public var storeLoops: Int?
    /// e2e by SEND (`bench e2e --send`): the store pushes. Embedded stores are started after
    /// the embedded gateways, with `--gateway` naming them; a store given with `--store`
    /// must have been started so.
    public var bySend = false
    /// e2e sealed (`bench e2e --sealed`): each payload sealed to its device's key of this suite.
    public var sealedSuite: KeySuite?
    /// `bench http` against a running store's HTTP API (loopback only) instead of an
    /// embedded one, with `apiToken` as its bearer token.
    public var httpURL: HostPort?
    public var apiToken: String?

    public init() {}

    public var isEmbedded: Bool { stores.isEmpty && gateways.isEmpty && httpURL == nil }

    /// `http://HOST:PORT` (a trailing slash allowed) with a numeric loopback host: the
    /// bench sends traffic to this machine only.
    public static func parseHTTPURL(_ text: String) throws(BenchError) -> HostPort {
        var rest = Substring(text)
        guard rest.hasPrefix("http://") else { throw .invalid("--http-url must be http://HOST:PORT, not '\(text)'") }
        rest = rest.dropFirst("http://".count)
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard let address = HostPort(parsing: rest), address.port > 0 else {
            throw .invalid("--http-url must be http://HOST:PORT, not '\(text)'")
        }
        guard address.isLoopback else { throw .invalid("--http-url must name 127.0.0.1 or [::1]: the bench loads this machine only") }
        return address
    }
    /// Whether the embedded gateways join a cluster over nats-server.
    public var embeddedCluster: Bool { gatewayCount > 1 || cluster }

    /// The most embedded gateways: each is a process with its own loop on a 2-core machine.
    public static let maxGateways = 16

    /// Refuses settings that do not go together, before anything starts.
    public func validate(for scenario: Scenario) throws(BenchError) {
        guard (1...TargetOptions.maxGateways).contains(gatewayCount) else {
            throw .invalid("--gateways must be 1 to \(TargetOptions.maxGateways)")
        }
        if gatewayCount > 1 || cluster {
            guard isEmbedded else {
                throw .invalid("--gateways and --nats are for the embedded gateways; running ones are named by --gateway A,B,C")
            }
            guard scenario.needsGateway, scenario != .connections else {
                throw .invalid("--gateways and --nats go with push, fanout and e2e")
            }
        }
        if let gatewayLoops {
            guard (0...256).contains(gatewayLoops) else { throw .invalid("--gateway-loops must be 0 (one per core) to 256") }
            guard isEmbedded, scenario.needsGateway else { throw .invalid("--gateway-loops is for the embedded gateway") }
        }
        if let storeLoops {
            guard (0...256).contains(storeLoops) else { throw .invalid("--store-loops must be 0 (one per core) to 256") }
            guard isEmbedded, scenario.needsStore else { throw .invalid("--store-loops is for the embedded store") }
        }
        if scenario == .http {
            guard stores.isEmpty, gateways.isEmpty else { throw .invalid("http targets a running store by --http-url") }
            if httpURL != nil {
                guard let apiToken, !apiToken.isEmpty else {
                    throw .invalid("--http-url needs --api-token (or SECUREPUSH_API_TOKEN): `securepush provider token create`")
                }
                guard !apiToken.utf8.contains(where: { $0 < 0x21 || $0 > 0x7E }) else { throw .invalid("--api-token holds spaces or control characters") }
            }
        } else if httpURL != nil || apiToken != nil {
            throw .invalid("--http-url and --api-token go with http")
        }
        if scenario == .connections, gateways.count > 1 {
            throw .invalid("connections measures one gateway's memory: give one --gateway")
        }
    }
}

/// A prepared target: addresses, the deployment's keys, and the user to store for.
final class BenchTarget {
    /// Every store the bench talks to; connections are spread over them in turn.
    let stores: [HostPort]
    /// The first store, to name in the report.
    var store: HostPort? { stores.first }
    /// Every store, comma-separated, for the report.
    var storesText: String { stores.map(\.description).joined(separator: ",") }
    /// Every gateway the bench talks to; devices and providers are spread over them in turn.
    let gateways: [HostPort]
    /// The first gateway.
    var gateway: HostPort? { gateways.first }
    /// Every gateway, comma-separated, for the report.
    var gatewaysText: String { gateways.map(\.description).joined(separator: ",") }
    let credentials: BenchCredentials
    let user: String
    let password: String
    /// The gateway processes known (always for embedded), in the order of `gateways`.
    let gatewayPIDs: [pid_t]
    /// The first gateway's process, for the memory of `connections`.
    var gatewayPID: pid_t? { gatewayPIDs.first }
    /// The nats-server of an embedded cluster: its CPU and message counters are reported.
    var nats: NATSServerProcess? { embedded?.nats }
    /// The services were started for the run.
    var isEmbedded: Bool { embedded != nil }
    /// The store processes known (for the CPU figures).
    let storePIDs: [pid_t]
    /// The store database when it is PostgreSQL (its server's CPU is reported too).
    let database: String?
    /// The deployment directory (the store's data lives there when the store is local).
    let dataDirectory: String
    /// How the bench's connections verify TLS services; nil for plain TCP.
    let tls: TLSContext?
    let serverName: String?
    /// The store's HTTP API and what `bench http` sends there.
    let http: HTTPTarget?
    private var embedded: EmbeddedDeployment?
    private var cleanup: (() -> Void)?

    private convenience init(stores: [HostPort], gateways: [HostPort], deployment: Deployment, user: String, password: String,
                             gatewayPIDs: [pid_t], storePIDs: [pid_t], database: String?, dataDirectory: String, tls: TLSContext?,
                             serverName: String?, http: HTTPTarget? = nil, embedded: EmbeddedDeployment?, cleanup: (() -> Void)?) {
        self.init(stores: stores, gateways: gateways, credentials: BenchCredentials(deployment), storeDatabase: StoreDatabase(deployment),
                  user: user, password: password, gatewayPIDs: gatewayPIDs, storePIDs: storePIDs, database: database,
                  dataDirectory: dataDirectory, tls: tls, serverName: serverName, http: http, embedded: embedded, cleanup: cleanup)
    }

    private init(stores: [HostPort], gateways: [HostPort], credentials: BenchCredentials, storeDatabase: StoreDatabase?, user: String,
                 password: String, gatewayPIDs: [pid_t], storePIDs: [pid_t], database: String?, dataDirectory: String, tls: TLSContext?,
                 serverName: String?, http: HTTPTarget?, embedded: EmbeddedDeployment?, cleanup: (() -> Void)?) {
        self.stores = stores
        self.database = database
        self.credentials = credentials
        self.storeDatabase = storeDatabase
        self.http = http
        self.gateways = gateways
        self.user = user
        self.password = password
        self.gatewayPIDs = gatewayPIDs
        self.storePIDs = storePIDs
        self.dataDirectory = dataDirectory
        self.tls = tls
        self.serverName = serverName
        self.embedded = embedded
        self.cleanup = cleanup
    }

    deinit { close() }

    /// The store database of the deployment: the bench's devices are enrolled there, so
    /// `--data-dir` must be the deployment the store itself uses. Nil for a running
    /// store's HTTP API, known by its address alone.
    let storeDatabase: StoreDatabase?

    /// Enrolls the bench user's `devices` in the store's registry, so that they may LOGIN
    /// and their fetch tokens are accepted ([4.6-4], [7.3-3]).
    func enrollDevices(_ devices: [String], tags: [String] = []) throws(BenchError) {
        guard let storeDatabase else { throw .setup("no deployment to enroll the bench's devices in") }
        try credentials.enroll(devices, user: user, tags: tags, database: storeDatabase)
    }

    /// Stops what the bench started and removes what it created (the devices it enrolled
    /// in a running deployment are revoked). Idempotent.
    func close() {
        if embedded == nil, let storeDatabase { credentials.revokeEnrolled(database: storeDatabase) }
        cleanup?()
        cleanup = nil
        embedded?.close()
        embedded = nil
    }

    static func prepare(_ options: TargetOptions, scenario: Scenario, payloadSize: Int) throws(BenchError) -> BenchTarget {
        let executable = options.executable ?? currentExecutablePath()
        try options.validate(for: scenario)
        if options.isEmbedded {
            guard options.dataDirectory == nil, options.user == nil else {
                throw .invalid("--data-dir and --user go with --store/--gateway; --embedded makes its own deployment")
            }
            guard options.tls == nil, options.serverName == nil else {
                throw .invalid("--ca-file and --server-name go with --store/--gateway; --tls makes the embedded services serve TLS")
            }
            guard let executable else { throw .setup("cannot find the securepush executable (/proc/self/exe)") }
            guard options.storeCount >= 1, options.storeCount <= 16 else { throw .invalid("--stores must be 1 to 16") }
            guard options.storeCount == 1 || options.database != nil else {
                throw .invalid("--stores above 1 needs --database: stores share only a PostgreSQL database")
            }
            let password = try randomHex(bytes: 16)
            // A database outlives the run: a user of its own keeps runs apart.
            let user = options.database == nil ? "bench" : "bench-" + (try randomHex(bytes: 6))
            let embedded = try EmbeddedDeployment(executable: executable, scenario: scenario, user: user, password: password,
                                                  maxPayload: payloadSize, tls: options.embeddedTLS, database: options.database,
                                                  storeCount: options.storeCount, gatewayCount: options.gatewayCount,
                                                  cluster: options.embeddedCluster, gatewayLoops: options.gatewayLoops,
                                                  storeLoops: options.storeLoops, storesForward: options.bySend || scenario == .http)
            let deployment = try openDeployment(embedded.directory)
            var tls: TLSContext?
            if let certificate = embedded.certificatePath {
                do {
                    tls = try TLSContext.client(caFile: certificate)
                } catch {
                    throw .setup("TLS: \(error)")
                }
            }
            var http: HTTPTarget?
            if scenario == .http {
                guard let endpoint = embedded.httpEndpoints.first, let token = embedded.apiToken else {
                    throw .setup("the embedded store serves no HTTP API")
                }
                http = HTTPTarget(endpoint: endpoint, token: token, recipient: user, device: HTTPTarget.benchDevice)
            }
            return BenchTarget(stores: embedded.storeEndpoints, gateways: embedded.gatewayEndpoints,
                               deployment: deployment, user: user, password: password,
                               gatewayPIDs: embedded.gateways.map(\.pid), storePIDs: embedded.stores.map(\.pid), database: options.database,
                               dataDirectory: embedded.directory,
                               tls: tls, serverName: nil, http: http, embedded: embedded, cleanup: nil)
        }
        if scenario == .http { return try prepareRemoteHTTP(options) }
        return try prepareRemote(options, scenario: scenario, executable: executable)
    }

    /// A running store's HTTP API: the address and token are all the bench needs; the
    /// recipient is `--user` (default `bench`), who must exist there. No credential is
    /// signed, so the deployment's keys are not needed: the keys here sign nothing.
    private static func prepareRemoteHTTP(_ options: TargetOptions) throws(BenchError) -> BenchTarget {
        guard let endpoint = options.httpURL, let token = options.apiToken else { throw .invalid("http needs --http-url and --api-token") }
        guard !options.embeddedTLS, options.tls == nil, options.database == nil, options.storeCount == 1 else {
            throw .invalid("--tls, --ca-file, --database and --stores are not for --http-url")
        }
        let user = options.user ?? "bench"
        guard !user.isEmpty, user.utf8.count <= 64 else { throw .invalid("--user must be 1 to 64 bytes") }
        let credentials: BenchCredentials
        do {
            credentials = BenchCredentials(providerKey: try SecretKey.generate(), serverKey: try SecretKey.generate())
        } catch {
            throw .setup("\(error)")
        }
        let storePIDs = ProcessMemory.listeningProcess(port: endpoint.port).map { [$0] } ?? []
        return BenchTarget(stores: [], gateways: [], credentials: credentials, storeDatabase: nil, user: user, password: "",
                           gatewayPIDs: [], storePIDs: storePIDs, database: nil, dataDirectory: options.dataDirectory ?? "",
                           tls: nil, serverName: nil,
                           http: HTTPTarget(endpoint: endpoint, token: token, recipient: user, device: HTTPTarget.benchDevice),
                           embedded: nil, cleanup: nil)
    }

    private static func prepareRemote(_ options: TargetOptions, scenario: Scenario, executable: String?) throws(BenchError) -> BenchTarget {
        guard !options.embeddedTLS else { throw .invalid("--tls is for the embedded services; running ones take --ca-file") }
        guard options.database == nil, options.storeCount == 1 else {
            throw .invalid("--database and --stores are for the embedded stores; running ones are named by --store A,B")
        }
        guard let directory = options.dataDirectory else {
            throw .invalid("--store/--gateway need --data-dir: the bench signs its credentials with the deployment's keys")
        }
        if scenario.needsStore, options.stores.isEmpty { throw .invalid("\(scenario.rawValue) needs --store HOST:PORT") }
        if scenario.needsGateway, options.gateways.isEmpty { throw .invalid("\(scenario.rawValue) needs --gateway HOST:PORT") }
        let deployment = try openDeployment(directory)
        var user = options.user ?? "bench"
        var password = ""
        var cleanup: (() -> Void)?
        if let given = options.user {
            guard !given.isEmpty, given.utf8.count <= 64 else { throw .invalid("--user must be 1 to 64 bytes") }
            if scenario.needsPassword {
                guard let file = options.passwordFile else { throw .invalid("\(scenario.rawValue) with --user needs --password-file") }
                password = String(try readTextFile(file).split(separator: "\n", omittingEmptySubsequences: false).first ?? "")
                guard !password.isEmpty else { throw .invalid("\(file) holds no password") }
            }
        } else if scenario.needsStore {
            guard let executable else { throw .setup("cannot find the securepush executable (/proc/self/exe)") }
            user = "bench-" + (try randomHex(bytes: 6))
            password = try randomHex(bytes: 16)
            try addUser(user, password: password, executable: executable, dataDirectory: directory)
            let name = user
            cleanup = {
                // The user's payloads expire with their TTL (1 h); the user goes now.
                try? Children.run(executable, ["user", "remove", name, "--data-dir", directory])
            }
        }
        // Local services are found from their ports (for memory and CPU figures).
        let gatewayPIDs = options.gatewayPID.map { [pid_t($0)] } ?? options.gateways.compactMap { ProcessMemory.listeningProcess(port: $0.port) }
        let storePIDs = options.stores.compactMap { ProcessMemory.listeningProcess(port: $0.port) }
        return BenchTarget(stores: options.stores, gateways: options.gateways, deployment: deployment, user: user,
                           password: password, gatewayPIDs: gatewayPIDs, storePIDs: storePIDs, database: nil, dataDirectory: directory,
                           tls: options.tls, serverName: options.serverName, embedded: nil, cleanup: cleanup)
    }

    private static func addUser(_ user: String, password: String, executable: String, dataDirectory: String) throws(BenchError) {
        try Children.run(executable, ["user", "add", user, "--data-dir", dataDirectory], stdinText: password + "\n")
    }

    private static func openDeployment(_ directory: String) throws(BenchError) -> Deployment {
        do {
            return try Deployment.open(directory)
        } catch {
            throw .setup("cannot open the deployment in \(directory): \(error)")
        }
    }

    private static func randomHex(bytes count: Int) throws(BenchError) -> String {
        do {
            return try SecureRandom.bytes(count).map { byte in
                let digits = String(byte, radix: 16)
                return byte < 16 ? "0" + digits : digits
            }.joined()
        } catch {
            throw .setup("\(error)")
        }
    }
}
