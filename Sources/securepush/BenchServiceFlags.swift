#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import PushBench
import PushEventLoop
import PushSecurity

// The bench's service flags: embedded services (and how many), or running ones named by
// address, with TLS to them.

/// TLS to running services.
struct TLSClientFlags: ParsableArguments {
    @Option(help: ArgumentHelp("Connect with TLS, verifying the running services' certificates against this CA (PEM).", valueName: "file"))
    var caFile: String?
    @Option(help: ArgumentHelp("The name their certificates must carry (default: the host of each address).", valueName: "name"))
    var serverName: String?

    func apply(to target: inout TargetOptions) throws {
        if serverName != nil, caFile == nil { throw CommandFailure("--server-name goes with --ca-file") }
        guard let caFile else { return }
        do {
            target.tls = try TLSContext.client(caFile: caFile)
        } catch {
            throw CommandFailure("TLS: \(error)")
        }
        target.serverName = serverName
    }
}

/// Where the embedded stores keep their data, and how many there are.
struct EmbeddedStoreFlags: ParsableArguments {
    @Option(help: ArgumentHelp("""
        The embedded stores keep their data in this PostgreSQL database (store.database), not in a SQLite file; \
        the bench's user is its own and removed after the run (default: SQLite).
        """, valueName: "url"))
    var database: String?
    @Option(help: ArgumentHelp("Embedded store processes on --database; connections alternate.", valueName: "n"))
    var stores = 1
    @Option(help: ArgumentHelp("Loop threads of each embedded store (its --loops; 0: one per core) (default: the store's own default, one per core).",
                               valueName: "n"))
    var storeLoops: Int?
}

struct StoreServiceFlags: ParsableArguments {
    @Flag(help: "Start a store for the run in a temporary deployment (the default).") var embedded = false
    @Flag(help: "The embedded store serves TLS, with a certificate made for the run.") var tls = false
    @OptionGroup var embeddedStores: EmbeddedStoreFlags
    @Option(help: ArgumentHelp("Running stores to load instead (with --data-dir), comma-separated; connections are spread over them.",
                               valueName: "host:port,...")) var store: String?
    @Option(help: ArgumentHelp("The running store's deployment (from `securepush init`); its keys sign the bench's credentials.",
                               valueName: "dir"))
    var dataDir: String?
    @Option(help: ArgumentHelp("An existing user to store for (default: a throwaway user the bench adds and removes).", valueName: "name"))
    var user: String?
    @OptionGroup var tlsClient: TLSClientFlags

    func target() throws -> TargetOptions {
        try makeTarget(embedded: embedded, tls: tls, stores: store, embeddedStores, gateway: nil, dataDir: dataDir, user: user,
                       passwordFile: nil, tlsClient)
    }
}

/// How many embedded gateways, and whether they form a cluster over nats-server.
struct EmbeddedGatewayFlags: ParsableArguments {
    @Option(help: ArgumentHelp("""
        Embedded gateway processes. Above 1 they form a cluster: the bench starts nats-server \
        (JetStream on, in the temporary directory) and each gateway joins it with --cluster and \
        --node gateway-K; devices and provider connections are spread over them in turn, and \
        the report adds nats-server's CPU and the NATS messages per push.
        """, valueName: "n"))
    var gateways = 1
    @Flag(help: "Run the embedded gateways as a cluster over nats-server even when there is one (--gateways 1), to compare with the plain gateway.")
    var nats = false
    @Option(help: ArgumentHelp("Loop threads of the embedded gateway (its --loops; 0: one per core) (default: the gateway's own default, one per core).",
                               valueName: "n"))
    var gatewayLoops: Int?

    func apply(to target: inout TargetOptions) {
        target.gatewayCount = gateways
        target.cluster = nats
        target.gatewayLoops = gatewayLoops
    }
}

/// Running gateways as `--gateway` takes them: one, or the nodes of a cluster comma-separated.
let runningGatewaysHelp = "comma-separated: the nodes of a cluster; devices and provider connections are spread over them in turn"

struct GatewayServiceFlags: ParsableArguments {
    @Flag(help: "Start a gateway for the run in a temporary deployment (the default).") var embedded = false
    @Flag(help: "The embedded gateway serves TLS, with a certificate made for the run.") var tls = false
    @Option(help: ArgumentHelp("Running gateways to load instead (with --data-dir), \(runningGatewaysHelp).", valueName: "host:port,..."))
    var gateway: String?
    @Option(help: ArgumentHelp("The running gateway's deployment (from `securepush init`); its keys sign the bench's credentials.",
                               valueName: "dir"))
    var dataDir: String?
    @OptionGroup var tlsClient: TLSClientFlags

    func target() throws -> TargetOptions {
        try makeTarget(embedded: embedded, tls: tls, stores: nil, nil, gateway: gateway, dataDir: dataDir, user: nil, passwordFile: nil, tlsClient)
    }
}

struct BothServicesFlags: ParsableArguments {
    @Flag(help: "Start a store and a gateway for the run in a temporary deployment (the default).") var embedded = false
    @Flag(help: "The embedded services serve TLS, with a certificate made for the run.") var tls = false
    @OptionGroup var embeddedStores: EmbeddedStoreFlags
    @Option(help: ArgumentHelp("Running stores to load instead (with --gateway and --data-dir), comma-separated; connections are spread over them.",
                               valueName: "host:port,..."))
    var store: String?
    @Option(help: ArgumentHelp("Running gateways to load instead (with --store and --data-dir), \(runningGatewaysHelp).",
                               valueName: "host:port,..."))
    var gateway: String?
    @Option(help: ArgumentHelp("The running services' deployment (from `securepush init`); its keys sign the bench's credentials.",
                               valueName: "dir"))
    var dataDir: String?
    @Option(help: ArgumentHelp("An existing user to store for and log the devices in as (default: a throwaway user the bench adds and removes).",
                               valueName: "name"))
    var user: String?
    @Option(help: ArgumentHelp("The password of --user, the first line of this file: the devices LOGIN with it.", valueName: "file"))
    var passwordFile: String?
    @OptionGroup var tlsClient: TLSClientFlags

    func target() throws -> TargetOptions {
        try makeTarget(embedded: embedded, tls: tls, stores: store, embeddedStores, gateway: gateway, dataDir: dataDir, user: user,
                       passwordFile: passwordFile, tlsClient)
    }
}

/// `bench http`: the embedded deployment, or a running store's HTTP API on this machine.
struct HTTPServiceFlags: ParsableArguments {
    @Flag(help: "Start a gateway and a store serving --http for the run in a temporary deployment (the default).") var embedded = false
    @Option(help: ArgumentHelp("A running store's HTTP API to load instead (127.0.0.1 or [::1] only); it must run with --gateway.",
                               valueName: "http://host:port"))
    var httpURL: String?
    @Option(help: ArgumentHelp("The bearer token for --http-url (`securepush provider token create`) (default: $SECUREPUSH_API_TOKEN).",
                               valueName: "token"))
    var apiToken: String?
    @Option(help: ArgumentHelp("The recipient of the messages sent to --http-url, an existing user (default: bench).", valueName: "name"))
    var user: String?

    func target() throws -> TargetOptions {
        var target = TargetOptions()
        guard let httpURL else {
            if apiToken != nil || user != nil { throw CommandFailure("--api-token and --user go with --http-url") }
            return target
        }
        if embedded { throw CommandFailure("--embedded excludes --http-url") }
        do {
            target.httpURL = try TargetOptions.parseHTTPURL(httpURL)
        } catch {
            throw CommandFailure(error.description)
        }
        target.apiToken = apiToken ?? getenv("SECUREPUSH_API_TOKEN").map { String(cString: $0) }
        target.user = user
        return target
    }
}

private func makeTarget(embedded: Bool, tls: Bool, stores storeList: String?, _ embeddedStores: EmbeddedStoreFlags?, gateway gatewayList: String?,
                        dataDir: String?, user: String?, passwordFile: String?, _ tlsClient: TLSClientFlags) throws -> TargetOptions {
    let stores = try storeList.map { try parseStoreAddresses($0).addresses } ?? []
    let gateways = try gatewayList.map { try parseGatewayAddresses($0).addresses } ?? []
    if embedded, !stores.isEmpty || !gateways.isEmpty { throw CommandFailure("--embedded excludes --store and --gateway") }
    var target = TargetOptions()
    target.stores = stores
    target.gateways = gateways
    if let embeddedStores {
        if let database = embeddedStores.database, let problem = ConfigSchema.databaseURLProblem(database) {
            throw CommandFailure("--database: \(problem)")
        }
        target.database = embeddedStores.database
        target.storeCount = embeddedStores.stores
        target.storeLoops = embeddedStores.storeLoops
    }
    target.dataDirectory = dataDir
    target.user = user
    target.passwordFile = passwordFile
    target.embeddedTLS = tls
    try tlsClient.apply(to: &target)
    return target
}

