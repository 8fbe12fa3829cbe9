import ArgumentParser
import CoreMetrics
import Logging
import Prometheus
import PushEventLoop
import PushGateway
import PushService
#if canImport(Glibc)
import Glibc
#endif

struct GatewayCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gateway",
        abstract: "Run the push gateway.")

    @Option(help: "The deployment directory made by `securepush init`.") var dataDir: String
    @Option(help: "Address to listen on; port 0 picks a free port.") var listen: HostPort?
    @Option(help: "TLS certificate (PEM).") var tlsCert: String?
    @Option(help: "TLS private key (PEM).") var tlsKey: String?
    @Option(help: "Serve Prometheus metrics at http://HOST:PORT/metrics.") var metrics: HostPort?
    @Option(help: "Most connections at once.") var maxConnections: Int?
    @Option(help: "Pushes queued per offline device.") var queueCapacity = 100
    @Option(help: "Bytes of output a device may leave unread before it is cut off.") var maxOutputBytes = 64 * 1024
    @Option(help: "Keepalive in milliseconds (0 turns it off); silent peers are closed after 1.5 times this.") var keepaliveMs: UInt32?
    @Option(help: "Log level.") var logLevel: LogLevelOption = .info

    func validate() throws {
        guard queueCapacity >= 1 else { throw ValidationError("--queue-capacity must be at least 1") }
        guard maxOutputBytes >= 1024 else { throw ValidationError("--max-output-bytes must be at least 1024") }
    }

    func run() throws {
        let deployment = try openDeployment(dataDir)
        let logger = makeLogger("securepush.gateway", level: logLevel)
        guard let address = listen ?? deployment.config["gateway.listen"].flatMap(HostPort.init(argument:)) else {
            throw CommandFailure("no address to listen on: pass --listen HOST:PORT")
        }
        let tls = try loadServerTLS(certificate: tlsCert, key: tlsKey)
        var limits = ServiceLimits(name: "securepush-gateway")
        limits.maxConnections = maxConnections ?? 20_000
        limits.keepaliveMs = keepaliveMs ?? limits.keepaliveMs
        var settings = GatewaySettings()
        settings.queueCapacity = queueCapacity

        let registry = PrometheusCollectorRegistry()
        let gatewayMetrics = GatewayMetrics(factory: PrometheusMetricsFactory(registry: registry))
        let loop = try EventLoop()
        let host = ServiceHost(loop: loop, limits: limits, logger: logger)
        host.maxOutputBytes = maxOutputBytes
        let logic = GatewayLogic(settings: settings, serverKey: deployment.serverKey, metrics: gatewayMetrics,
                                 wallClock: wallClockMs, monotonicClock: EventLoop.monotonicMilliseconds)
        let server = GatewayServer(host: host, logic: logic, providerKey: deployment.providerKey, wallClock: wallClockMs)
        do {
            try host.listen(host: address.host, port: address.port, tls: tls)
        } catch {
            throw CommandFailure("cannot listen on \(address): \(error)")
        }
        let endpoint = MetricsEndpoint(registry: registry)
        if let metrics {
            do {
                try endpoint.start(host: metrics.host, port: metrics.port, loop: loop)
            } catch {
                throw CommandFailure(error.description)
            }
            announce("metrics on \(metrics.host):\(endpoint.port)")
        }
        let bound = HostPort(argument: "\(address.host):\(host.port ?? address.port)") ?? address
        logger.info("gateway ready", metadata: ["listen": "\(bound)"])
        announce("listening on \(bound)")

        var stopping = false
        let stop = {
            guard !stopping else { return }
            stopping = true
            logger.info("sending GOAWAY to every connection before exit")
            host.drain { loop.stop() }
        }
        unblockTerminationSignals()
        let signals = [loop.onSignal(SIGTERM, stop), loop.onSignal(SIGINT, stop)]
        loop.run()
        signals.forEach { $0.cancel() }
        endpoint.stop()
        loop.shutdown()
        _ = server
        logger.info("gateway stopped")
    }
}
