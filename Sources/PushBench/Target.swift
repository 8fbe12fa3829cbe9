#if canImport(Glibc)
import Glibc
#endif
import PushSecurity
import PushEventLoop
import PushStore

/// Where the load goes: services started for the run (`embedded`, the default), or
/// running ones named by `store`/`gateway` together with their deployment directory.
public struct TargetOptions: Sendable {
    public var store: HostPort?
    public var gateway: HostPort?
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

    public init() {}

    public var isEmbedded: Bool { store == nil && gateway == nil }
}

/// A prepared target: addresses, the deployment's keys, and the user to store for.
final class BenchTarget {
    let store: HostPort?
    let gateway: HostPort?
    let credentials: BenchCredentials
    let user: String
    let password: String
    /// The gateway process, when known (always for embedded).
    let gatewayPID: pid_t?
    /// The store process, when known (for the CPU figures).
    let storePID: pid_t?
    /// The deployment directory (the store's data lives there when the store is local).
    let dataDirectory: String
    /// How the bench's connections verify TLS services; nil for plain TCP.
    let tls: TLSContext?
    let serverName: String?
    private var embedded: EmbeddedDeployment?
    private var cleanup: (() -> Void)?

    private init(store: HostPort?, gateway: HostPort?, credentials: BenchCredentials, user: String, password: String,
                 gatewayPID: pid_t?, storePID: pid_t?, dataDirectory: String, tls: TLSContext?, serverName: String?,
                 embedded: EmbeddedDeployment?, cleanup: (() -> Void)?) {
        self.store = store
        self.gateway = gateway
        self.credentials = credentials
        self.user = user
        self.password = password
        self.gatewayPID = gatewayPID
        self.storePID = storePID
        self.dataDirectory = dataDirectory
        self.tls = tls
        self.serverName = serverName
        self.embedded = embedded
        self.cleanup = cleanup
    }

    deinit { close() }

    /// The store database of the deployment: the bench's devices are enrolled there, so
    /// `--data-dir` must be the directory the store itself uses.
    var databasePath: String { StoreFiles.databasePath(dataDirectory) }

    /// Enrolls the bench user's `devices` in the store's registry, so that they may LOGIN
    /// and their fetch tokens are accepted ([4.6-4], [7.3-3]).
    func enrollDevices(_ devices: [String], tags: [String] = []) throws(BenchError) {
        try credentials.enroll(devices, user: user, tags: tags, databasePath: databasePath)
    }

    /// Stops what the bench started and removes what it created (the devices it enrolled
    /// in a running deployment are revoked). Idempotent.
    func close() {
        if embedded == nil { credentials.revokeEnrolled(databasePath: databasePath) }
        cleanup?()
        cleanup = nil
        embedded?.close()
        embedded = nil
    }

    static func prepare(_ options: TargetOptions, scenario: Scenario, payloadSize: Int) throws(BenchError) -> BenchTarget {
        let executable = options.executable ?? currentExecutablePath()
        if options.isEmbedded {
            guard options.dataDirectory == nil, options.user == nil else {
                throw .invalid("--data-dir and --user go with --store/--gateway; --embedded makes its own deployment")
            }
            guard options.tls == nil, options.serverName == nil else {
                throw .invalid("--ca-file and --server-name go with --store/--gateway; --tls makes the embedded services serve TLS")
            }
            guard let executable else { throw .setup("cannot find the securepush executable (/proc/self/exe)") }
            let password = try randomHex(bytes: 16)
            let embedded = try EmbeddedDeployment(executable: executable, scenario: scenario, user: "bench", password: password,
                                                  maxPayload: payloadSize, tls: options.embeddedTLS)
            let deployment = try openDeployment(embedded.directory)
            var tls: TLSContext?
            if let certificate = embedded.certificatePath {
                do {
                    tls = try TLSContext.client(caFile: certificate)
                } catch {
                    throw .setup("TLS: \(error)")
                }
            }
            return BenchTarget(store: embedded.storeEndpoint, gateway: embedded.gatewayEndpoint,
                               credentials: BenchCredentials(deployment), user: "bench", password: password,
                               gatewayPID: embedded.gateway?.pid, storePID: embedded.store?.pid, dataDirectory: embedded.directory,
                               tls: tls, serverName: nil, embedded: embedded, cleanup: nil)
        }
        return try prepareRemote(options, scenario: scenario, executable: executable)
    }

    private static func prepareRemote(_ options: TargetOptions, scenario: Scenario, executable: String?) throws(BenchError) -> BenchTarget {
        guard !options.embeddedTLS else { throw .invalid("--tls is for the embedded services; running ones take --ca-file") }
        guard let directory = options.dataDirectory else {
            throw .invalid("--store/--gateway need --data-dir: the bench signs its credentials with the deployment's keys")
        }
        if scenario.needsStore, options.store == nil { throw .invalid("\(scenario.rawValue) needs --store HOST:PORT") }
        if scenario.needsGateway, options.gateway == nil { throw .invalid("\(scenario.rawValue) needs --gateway HOST:PORT") }
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
        let gatewayPID = options.gatewayPID.map { pid_t($0) } ?? options.gateway.flatMap { ProcessMemory.listeningProcess(port: $0.port) }
        let storePID = options.store.flatMap { ProcessMemory.listeningProcess(port: $0.port) }
        return BenchTarget(store: options.store, gateway: options.gateway, credentials: BenchCredentials(deployment), user: user,
                           password: password, gatewayPID: gatewayPID, storePID: storePID, dataDirectory: directory,
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
