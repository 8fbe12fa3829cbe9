import Testing
import PushGateway
import PushSecurity
import PushTestSupport

@Suite("The gateway's settings from the config file", .ownThread)
struct GatewayConfigKeysTests {
    @Test("gateway.* keys set the queue, output limit, delivery window, stall limit, connection limit and keepalive")
    func gatewayKeys() throws {
        let temporary = try TemporaryDeployment()
        let path = temporary.directory + "/" + Deployment.configFile
        let text = try Deployment.readFile(path)
            + "gateway.queue_capacity = 7\ngateway.max_output_bytes = 2048\ngateway.delivery_window = 3\n"
            + "gateway.max_connections = 99\ngateway.keepalive_ms = 1500\nstore.keepalive_ms = 9\ngateway.max_push_ttl_s = 60\n"
            + "gateway.output_stall_ms = 2500\n"
        try Deployment.writePrivate(path, text)
        let configuration = GatewayConfiguration(deployment: try Deployment.open(temporary.directory), host: "127.0.0.1", port: 0)
        #expect(configuration.queueCapacity == 7)
        #expect(configuration.maxOutputBytes == 2_048)
        #expect(configuration.deliveryWindow == 3)
        #expect(configuration.limits.maxConnections == 99)
        #expect(configuration.limits.keepaliveMs == 1_500, "the store's key does not apply")
        #expect(configuration.settings.maxPushTTLSeconds == 60)
        #expect(configuration.outputStallMs == 2_500)
    }

    @Test("without the keys the gateway keeps its defaults")
    func defaults() throws {
        let temporary = try TemporaryDeployment()
        let configuration = GatewayConfiguration(deployment: temporary.deployment, host: "127.0.0.1", port: 0)
        let plain = GatewayConfiguration(serverKey: temporary.deployment.serverKey, providerKey: temporary.deployment.providerKey)
        #expect(configuration.queueCapacity == plain.queueCapacity)
        #expect(configuration.maxOutputBytes == plain.maxOutputBytes)
        #expect(configuration.deliveryWindow == plain.deliveryWindow)
        #expect(configuration.limits.maxConnections == plain.limits.maxConnections)
        #expect(configuration.limits.keepaliveMs == plain.limits.keepaliveMs)
        #expect(configuration.settings.maxPushTTLSeconds == plain.settings.maxPushTTLSeconds)
        #expect(configuration.outputStallMs == plain.outputStallMs)
    }

    @Test("the defaults ConfigSchema documents are the gateway's defaults")
    func documentedDefaults() throws {
        let temporary = try TemporaryDeployment()
        let plain = GatewayConfiguration(serverKey: temporary.deployment.serverKey, providerKey: temporary.deployment.providerKey)
        func documented(_ name: String) -> String? { ConfigSchema.key(named: name)?.key.defaultValue }
        #expect(documented("gateway.queue_capacity") == "\(plain.queueCapacity)")
        #expect(documented("gateway.max_output_bytes") == "\(plain.maxOutputBytes)")
        #expect(documented("gateway.delivery_window") == "\(plain.deliveryWindow)")
        #expect(documented("gateway.max_connections") == "\(plain.limits.maxConnections)")
        #expect(documented("gateway.keepalive_ms") == "\(plain.limits.keepaliveMs)")
        #expect(documented("gateway.max_push_ttl_s") == "\(plain.settings.maxPushTTLSeconds)")
        #expect(documented("gateway.output_stall_ms") == "\(plain.outputStallMs)")
        #expect(plain.settings.maxPushTTLSeconds == 30 * 86_400)
        #expect(documented("handshake_timeout_ms") == "\(plain.limits.timeouts.handshakeMs)")
        #expect(documented("max_pending_handshakes") == "\(plain.limits.maxPendingHandshakes)")
    }
}
