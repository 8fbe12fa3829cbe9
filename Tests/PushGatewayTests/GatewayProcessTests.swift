import Testing
import PushClient
import PushTestSupport
import PushWire

/// `securepush gateway` as a child process: for what only the real binary can show.
final class GatewayProcess: GatewayUnderTest {
    let deployment: TemporaryDeployment
    let service: ServiceProcess

    init(arguments: [String] = []) throws {
        deployment = try TemporaryDeployment(commandLine: true)
        service = try ServiceProcess(["gateway", "--data-dir", deployment.directory] + arguments)
    }

    var reachable: any ReachableService { service }

    func scrapeMetrics() throws -> String {
        let port = try #require(service.announcedMetricsPort)
        let client = try BlockingWireClient(host: "127.0.0.1", port: port)
        try client.sendRaw(Array("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
        return client.readAll()
    }
}

@Suite("The gateway binary", .ownThread)
struct GatewayProcessTests {
    @Test("--metrics serves GET /metrics in the Prometheus text format")
    func metricsEndpoint() throws {
        let gateway = try GatewayProcess(arguments: ["--metrics", "127.0.0.1:0"])
        let phone = try gateway.device("phone")
        _ = try gateway.push(.device("phone"), id: "m", via: try gateway.provider())
        _ = try phone.nextPushID()
        var text = ""
        #expect(waitUntil {
            text = (try? gateway.scrapeMetrics()) ?? ""
            return text.contains("securepush_gateway_pushes_acknowledged_total 1")
        })
        #expect(text.contains("securepush_gateway_pushes_written_total 1"))
    }

    @Test("SIGTERM: GOAWAY SHUTTING_DOWN to every connection, then exit 0")
    func gracefulStop() throws {
        let gateway = try GatewayProcess()
        let phone = try gateway.device("phone")
        #expect(gateway.service.terminate() == 0)
        guard case .goaway(let goaway) = try phone.nextPush().message else { Issue.record("no GOAWAY"); return }
        #expect(goaway.status == .shuttingDown)
    }
}
