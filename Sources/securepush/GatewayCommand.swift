import ArgumentParser
import Prometheus
import PushEventLoop
import PushGateway

struct GatewayCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gateway",
        abstract: "Run the push gateway.")

    @Option(help: "The deployment directory made by `securepush init`.") var dataDir: String
    @Option(help: "Address to listen on; port 0 picks a free port.") var listen: HostPort?
    @Option(help: "TLS certificate (PEM).") var tlsCert: String?
    @Option(help: "TLS private key (PEM).") var tlsKey: String?
    @Option(help: "Serve Prometheus metrics at http://HOST:PORT/metrics.") var metrics: HostPort?
    @Option(help: "Most admitted peers (past HELLO_OK) at once; a HELLO beyond it gets ERROR BUSY (default 20000).") var maxConnections: Int?
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "Pushes queued per offline device.") var queueCapacity = 100
    @Option(help: "Bytes of output a device may leave unread before it is cut off.") var maxOutputBytes = 64 * 1024
    @Option(help: "Pushes written to a device and not yet acknowledged (DELIVERY_ACK), at most; the others wait in its queue until acknowledgements free room.")
    var deliveryWindow = GatewaySettings().deliveryWindow
    @Option(help: "Keepalive in milliseconds (0 turns it off); silent peers are closed after 1.5 times this.") var keepaliveMs: UInt32?
    @Option(help: "Log level.") var logLevel: LogLevelOption = .info

    func validate() throws {
        guard queueCapacity >= 1 else { throw ValidationError("--queue-capacity must be at least 1") }
        guard maxOutputBytes >= 1024 else { throw ValidationError("--max-output-bytes must be at least 1024") }
        guard deliveryWindow >= 1 else { throw ValidationError("--delivery-window must be at least 1") }
    }

    func run() throws {
        let deployment = try openDeployment(dataDir)
        guard let address = listen ?? deployment.config["gateway.listen"].flatMap(HostPort.init(argument:)) else {
            throw CommandFailure("no address to listen on: pass --listen HOST:PORT")
        }
        let registry = PrometheusCollectorRegistry()
        var configuration = GatewayConfiguration(deployment: deployment, host: address.host, port: address.port)
        configuration.tls = try loadServerTLS(certificate: tlsCert, key: tlsKey)
        configuration.logger = makeLogger("securepush.gateway", level: logLevel)
        configuration.queueCapacity = queueCapacity
        configuration.maxOutputBytes = maxOutputBytes
        configuration.deliveryWindow = deliveryWindow
        configuration.metricsFactory = PrometheusMetricsFactory(registry: registry)
        if let maxConnections { configuration.limits.maxConnections = maxConnections }
        connection.apply(to: &configuration.limits)
        if let keepaliveMs { configuration.limits.keepaliveMs = keepaliveMs }

        let loop = try EventLoop()
        let service: GatewayService
        do {
            service = try GatewayService.start(configuration, on: loop)
        } catch {
            throw CommandFailure(error.description)
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
        let signals = stopOnTermination(loop) { stopped in service.drain(then: stopped) }
        announce("listening on \(HostPort(host: address.host, port: service.port))")
        loop.run()
        signals.forEach { $0.cancel() }
        endpoint.stop()
        loop.shutdown()
    }
}
