import Testing
import PushEventLoop
import PushGateway
import PushTestSupport

/// Starts a gateway on a loop of the calling thread and returns why it failed, if it did.
private func startFailure(_ configuration: GatewayConfiguration) throws -> GatewayServiceError? {
    let loop = try EventLoop()
    defer { loop.shutdown() }
    do {
        let service = try GatewayService.start(configuration, on: loop)
        service.stop()
        return nil
    } catch {
        return error
    }
}

@Suite("Starting a gateway", .ownThread)
struct GatewayStartTests {
    @Test("a port already taken fails the start")
    func portTaken() throws {
        let deployment = try TemporaryDeployment()
        let running = try InProcessGateway(deployment)
        let configuration = GatewayConfiguration(deployment: deployment.deployment, host: "127.0.0.1", port: running.port)
        guard case .cannotListen(_, let port, _)? = try startFailure(configuration) else {
            Issue.record("two gateways listen on one port"); return
        }
        #expect(port == running.port)
    }

    @Test("a host name that does not resolve fails the start")
    func badAddress() throws {
        let deployment = try TemporaryDeployment()
        let configuration = GatewayConfiguration(deployment: deployment.deployment, host: "nohost.invalid", port: 0)
        guard case .cannotListen(let host, _, .cannotResolve(let name, _, _))? = try startFailure(configuration) else {
            Issue.record("listened on a name that does not resolve"); return
        }
        #expect(host == "nohost.invalid")
        #expect(name == "nohost.invalid")
    }

    @Test("no queue, no room for output or no delivery window is refused before anything starts")
    func invalidLimits() throws {
        let deployment = try TemporaryDeployment()
        var noQueue = GatewayConfiguration(deployment: deployment.deployment, host: "127.0.0.1", port: 0)
        noQueue.queueCapacity = 0
        var noRoom = GatewayConfiguration(deployment: deployment.deployment, host: "127.0.0.1", port: 0)
        noRoom.maxOutputBytes = 100
        var noWindow = GatewayConfiguration(deployment: deployment.deployment, host: "127.0.0.1", port: 0)
        #expect(noWindow.deliveryWindow == 64, "the default window")
        noWindow.deliveryWindow = 0
        for configuration in [noQueue, noRoom, noWindow] {
            guard case .invalidConfiguration? = try startFailure(configuration) else {
                Issue.record("started with queue \(configuration.queueCapacity), output \(configuration.maxOutputBytes), window \(configuration.deliveryWindow)"); continue
            }
        }
    }
}
