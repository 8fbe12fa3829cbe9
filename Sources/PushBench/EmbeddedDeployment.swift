#if canImport(Glibc)
import Glibc
#endif
import PushClock
import PushProcess
import PushEventLoop
import PushSecurity
import PushStore

/// `--embedded`: a temporary deployment with its own store and gateway as child processes
/// of the same `securepush` executable, so one command measures everything. Everything
/// it creates lives in one temporary directory, removed by `close()`.
///
/// A cluster (`--gateways N` above 1, or `--nats`) starts `nats-server` first (JetStream in
/// the temporary directory), then the stores, then N gateways joined to it as
/// `gateway-1` ... `gateway-N`, each following the same stores.
final class EmbeddedDeployment {
    let root: String
    let directory: String
    private(set) var stores: [ChildProcess] = []
    private(set) var gateways: [ChildProcess] = []
    private(set) var storeEndpoints: [HostPort] = []
    private(set) var gatewayEndpoints: [HostPort] = []
    /// The stores' HTTP provider APIs (`bench http`: each store serves `--http`).
    private(set) var httpEndpoints: [HostPort] = []
    /// The API token of provider "bench", minted before the stores start (`bench http`).
    private(set) var apiToken: String?
    /// The broker of a cluster run.
    private(set) var nats: NATSServerProcess?
    /// The self-signed certificate the services serve with `tls` (clients trust it).
    private(set) var certificatePath: String?
    private var tlsFlags: [String] = []
    /// How a store verifies the embedded gateways' certificate when it hands them pushes.
    private var caFlags: [String] { certificatePath.map { ["--gateway-ca-file", $0] } ?? [] }

    /// PBKDF2 iterations for the bench user: enough to exercise the code, cheap enough
    /// that a hundred device LOGINs take milliseconds (the tests do the same).
    static let passwordIterations = 1_000

    private let executable: String
    /// The user added to a PostgreSQL database, removed again by `close()`.
    private var addedUser: String?

    init(executable: String, scenario: Scenario, user: String, password: String, maxPayload: Int, tls: Bool = false,
         database: String? = nil, storeCount: Int = 1, gatewayCount: Int = 1, cluster: Bool = false, gatewayLoops: Int? = nil,
         storeLoops: Int? = nil, storesForward: Bool = false) throws(BenchError) {
        self.executable = executable
        root = try makeTemporaryDirectory(prefix: "securepush-bench")
        directory = root + "/deployment"
        do {
            if tls { try makeCertificate() }
            try Children.run(executable, ["init", directory])
            try EmbeddedDeployment.tune(directory + "/securepush.conf", maxPayload: maxPayload, database: database)
            if cluster, scenario.needsGateway {
                nats = try NATSServerProcess(storeDirectory: root + "/jetstream")
            }
            // Stores that hand pushes to the gateways (SEND) start after them.
            func startStores() throws(BenchError) {
                guard scenario.needsStore else { return }
                try Children.run(executable, ["user", "add", user, "--data-dir", directory], stdinText: password + "\n")
                if database != nil { addedUser = user }
                var extra = storeLoops.map { ["--loops", "\($0)"] } ?? []
                if storesForward { extra += ["--gateway", gatewayEndpoints.map(\.description).joined(separator: ",")] + caFlags }
                let servesHTTP = scenario == .http
                if servesHTTP {
                    apiToken = try EmbeddedDeployment.mintAPIToken(directory)
                    extra += ["--http", "127.0.0.1:0"]
                }
                for index in 0..<storeCount {
                    let store = try spawn(executable, "store", name: storeCount == 1 ? "store" : "store\(index + 1)", extra: extra)
                    stores.append(store)
                    storeEndpoints.append(try EmbeddedDeployment.ready(store))
                    if servesHTTP { httpEndpoints.append(try EmbeddedDeployment.ready(store, prefix: "http api on ")) }
                }
            }
            if !storesForward { try startStores() }
            if scenario.needsGateway || storesForward {
                // Started one after another: each announces its port before the next starts.
                for index in 0..<gatewayCount {
                    let arguments = EmbeddedDeployment.clusterArguments(natsURL: nats?.clientURL, node: index + 1)
                        + (gatewayLoops.map { ["--loops", "\($0)"] } ?? [])
                    let gateway = try spawn(executable, "gateway", name: gatewayCount == 1 ? "gateway" : "gateway\(index + 1)",
                                            extra: arguments)
                    gateways.append(gateway)
                    gatewayEndpoints.append(try EmbeddedDeployment.ready(gateway))
                }
            }
            if storesForward { try startStores() }
        } catch {
            close()
            throw error
        }
    }

    deinit { close() }

    /// SIGTERM to the services (they drain and exit), the user added to a PostgreSQL
    /// database removed with her payloads, then the directory goes. Idempotent.
    func close() {
        for gateway in gateways { gateway.terminate(graceSeconds: 10) }
        for store in stores { store.terminate(graceSeconds: 10) }
        gateways = []
        stores = []
        nats?.stop()
        nats = nil
        if let user = addedUser {
            addedUser = nil
            try? Children.run(executable, ["user", "remove", user, "--data-dir", directory])
        }
        removeTree(root)
    }

    private func spawn(_ executable: String, _ service: String, name: String? = nil, extra: [String] = []) throws(BenchError) -> ChildProcess {
        try Children.spawn(executable, [service, "--data-dir", directory, "--listen", "127.0.0.1:0"] + tlsFlags + extra, name: name ?? service)
    }

    /// A cluster gateway's flags: the broker and its node name. None for the single
    /// gateway without a broker. Like the single gateway, the nodes follow no registry:
    /// the bench's devices are not enrolled, and a side-by-side run compares like with like.
    static func clusterArguments(natsURL: String?, node: Int) -> [String] {
        guard let natsURL else { return [] }
        return ["--cluster", natsURL, "--node", "gateway-\(node)"]
    }

    /// A certificate for 127.0.0.1 (where the services listen) and localhost.
    private func makeCertificate() throws(BenchError) {
        let certificate = root + "/tls.crt", key = root + "/tls.key"
        do {
            try SelfSignedCertificate.write(commonName: "securepush bench", subjectAltNames: ["IP:127.0.0.1", "DNS:localhost"],
                                            certificatePath: certificate, privateKeyPath: key, validDays: 2)
        } catch {
            throw .setup("cannot make the bench's TLS certificate: \(error)")
        }
        certificatePath = certificate
        tlsFlags = ["--tls-cert", certificate, "--tls-key", key]
    }

    /// A token for provider "bench" in the deployment's store database (what
    /// `securepush provider token create bench` does).
    private static func mintAPIToken(_ directory: String) throws(BenchError) -> String {
        do {
            let deployment = try Deployment.open(directory)
            return try StoreDatabase(deployment).apiTokens().create(provider: "bench", nowMs: Clocks.wallMilliseconds()).text
        } catch {
            throw .setup("cannot mint the bench's API token: \(error)")
        }
    }

    private static func ready(_ child: ChildProcess, prefix: String = "listening on ") throws(BenchError) -> HostPort {
        let address = try Children.line(child, prefix: prefix, seconds: 30)
        guard let endpoint = HostPort(parsing: address) else { throw .child("\(child.name) announced an unreadable address: \(address)") }
        return endpoint
    }

    /// Fast password hashes, and a payload limit that fits `--payload-size`.
    private static func tune(_ path: String, maxPayload: Int, database: String?) throws(BenchError) {
        var settings = ["password.iterations": "\(passwordIterations)", "store.max_payload_bytes": "\(max(4096, maxPayload))"]
        if let database { settings["store.database"] = database }
        var lines = try readTextFile(path).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        for (key, value) in settings {
            if let index = lines.firstIndex(where: { $0.split(separator: "=").first?.trimmed == key }) {
                lines[index] = "\(key) = \(value)"
            } else {
                lines.append("\(key) = \(value)")
            }
        }
        try writePrivateFile(path, lines.joined(separator: "\n"))
    }
}

extension Substring {
    var trimmed: String { String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed()) }
}
