import ArgumentParser
import Logging
import PushEventLoop
import PushSecurity
import PushService
import PushSession
import PushStore
import PushWire
#if canImport(Glibc)
import Glibc
#endif

struct StoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store",
        abstract: "Run the payload store.")

    @Option(help: "The deployment directory made by `securepush init`.") var dataDir: String
    @Option(help: "Address to listen on; port 0 picks a free port.") var listen: HostPort?
    @Option(help: "TLS certificate (PEM).") var tlsCert: String?
    @Option(help: "TLS private key (PEM).") var tlsKey: String?
    @Option(help: "Most connections at once.") var maxConnections: Int?
    @Option(help: "Largest payload in bytes.") var maxPayload: Int?
    @Option(help: "Fetch token lifetime in seconds.") var tokenLifetime: Int?
    @Option(help: "Keepalive in milliseconds (0 turns it off); silent peers are closed after 1.5 times this.") var keepaliveMs: UInt32?
    @Option(help: "Log level.") var logLevel: LogLevelOption = .info

    func run() throws {
        let deployment = try openDeployment(dataDir)
        let logger = makeLogger("securepush.store", level: logLevel)
        var settings = StoreSettings()
        settings.maxPayloadBytes = maxPayload ?? deployment.integer("store.max_payload_bytes") ?? settings.maxPayloadBytes
        settings.tokenLifetimeMs = UInt64(tokenLifetime ?? deployment.integer("store.token_lifetime_s") ?? 3600) * 1000
        var limits = ServiceLimits(name: "securepush-store", served: StoreServer.served)
        limits.maxConnections = maxConnections ?? limits.maxConnections
        limits.keepaliveMs = keepaliveMs ?? limits.keepaliveMs
        // A frame must hold the largest payload plus its fields.
        limits.maxFrame = min(FrameLimits.ceiling, max(FrameLimits.defaultMaxFrame, settings.maxPayloadBytes + 1024))
        guard settings.maxPayloadBytes > 0, settings.maxPayloadBytes <= FrameLimits.ceiling - 1024 else {
            throw CommandFailure("--max-payload must be between 1 and \(FrameLimits.ceiling - 1024)")
        }
        guard let address = listen ?? deployment.config["store.listen"].flatMap(HostPort.init(argument:)) else {
            throw CommandFailure("no address to listen on: pass --listen HOST:PORT")
        }
        let tls = try loadServerTLS(certificate: tlsCert, key: tlsKey)

        let path = StoreFiles.databasePath(dataDir)
        let reader: SQLitePayloadReader
        let writer: SQLitePayloadWriter
        do {
            writer = try SQLitePayloadWriter(path: path)
            reader = try SQLitePayloadReader(path: path)
        } catch {
            throw CommandFailure("cannot open \(path): \(error)")
        }
        let loop = try EventLoop()
        let logic = StoreLogic(settings: settings, reader: reader, serverKey: deployment.serverKey, providerKey: deployment.providerKey)
        let serverBox = LoopBoxHolder<StoreServer>()
        let handle = loop.handle
        let committer = GroupCommitWriter(writer: writer, sweepIntervalMs: settings.sweepIntervalMs) { tickets, outcomes in
            _ = handle.executeWithLoop { _ in serverBox.value?.deliverCommitted(tickets: tickets, outcomes: outcomes) }
        }
        let server = StoreServer(loop: loop, limits: limits, logger: logger, logic: logic, committer: committer)
        let host = server.host!
        serverBox.value = server
        committer.start()
        do {
            try host.listen(host: address.host, port: address.port, tls: tls)
        } catch {
            committer.stop()
            throw CommandFailure("cannot listen on \(address): \(error)")
        }
        let bound = HostPort(argument: "\(address.host):\(host.port ?? address.port)") ?? address
        logger.info("store ready", metadata: ["listen": "\(bound)", "data_dir": "\(dataDir)"])
        announce("listening on \(bound)")

        var stopping = false
        let stop = {
            guard !stopping else { return }
            stopping = true
            logger.info("draining before exit")
            host.drain {
                server.flushFetchTallies()
                committer.stop()
                loop.stop()
            }
        }
        unblockTerminationSignals()
        let signals = [loop.onSignal(SIGTERM, stop), loop.onSignal(SIGINT, stop)]
        loop.run()
        signals.forEach { $0.cancel() }
        loop.shutdown()
        try? writer.checkpoint()
        logger.info("store stopped")
    }
}

/// Lets a writer-thread closure find the server the loop owns; read on the loop only.
final class LoopBoxHolder<Value: AnyObject>: @unchecked Sendable {
    var value: Value?
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
