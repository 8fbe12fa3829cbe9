import ArgumentParser
import PushEventLoop
import PushStore

struct StoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store",
        abstract: "Run the payload store.")

    @Option(help: "The deployment directory made by `securepush init`.") var dataDir: String
    @Option(help: "Address to listen on; port 0 picks a free port.") var listen: HostPort?
    @Option(help: "TLS certificate (PEM).") var tlsCert: String?
    @Option(help: "TLS private key (PEM).") var tlsKey: String?
    @Option(help: "Most admitted peers (past HELLO_OK) at once; a HELLO beyond it gets ERROR BUSY (default 10000).") var maxConnections: Int?
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "Largest payload in bytes.") var maxPayload: Int?
    @Option(help: "Fetch token lifetime in seconds.") var tokenLifetime: Int?
    @Option(help: "Keepalive in milliseconds (0 turns it off); silent peers are closed after 1.5 times this.") var keepaliveMs: UInt32?
    @Option(help: "Log level.") var logLevel: LogLevelOption = .info

    func run() throws {
        let deployment = try openDeployment(dataDir)
        guard let address = listen ?? deployment.config["store.listen"].flatMap(HostPort.init(argument:)) else {
            throw CommandFailure("no address to listen on: pass --listen HOST:PORT")
        }
        var configuration = StoreConfiguration(deployment: deployment, host: address.host, port: address.port)
        configuration.tls = try loadServerTLS(certificate: tlsCert, key: tlsKey)
        configuration.logger = makeLogger("securepush.store", level: logLevel)
        if let maxPayload { configuration.settings.maxPayloadBytes = maxPayload }
        if let tokenLifetime { configuration.settings.tokenLifetimeMs = UInt64(max(0, tokenLifetime)) * 1000 }
        if let maxConnections { configuration.limits.maxConnections = maxConnections }
        connection.apply(to: &configuration.limits)
        if let keepaliveMs { configuration.limits.keepaliveMs = keepaliveMs }

        let loop = try EventLoop()
        let service: StoreService
        do {
            service = try StoreService.start(configuration, on: loop)
        } catch {
            throw CommandFailure(error.description)
        }
        let signals = stopOnTermination(loop) { stopped in service.drain(then: stopped) }
        announce("listening on \(HostPort(host: address.host, port: service.port))")
        loop.run()
        signals.forEach { $0.cancel() }
        loop.shutdown()
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
