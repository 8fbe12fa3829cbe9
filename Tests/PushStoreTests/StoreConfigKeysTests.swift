import Testing
import PushSecurity
import PushStore
import PushTestSupport

@Suite("The store's settings from the config file", .ownThread)
struct StoreConfigKeysTests {
    @Test("store.* keys set the payload limit, token lifetime, connection limit and keepalive")
    func storeKeys() throws {
        let temporary = try TemporaryDeployment()
        let path = temporary.directory + "/" + Deployment.configFile
        let text = try Deployment.readFile(path)
            .replacingOccurrences(of: "store.max_payload_bytes = 4096", with: "store.max_payload_bytes = 9000")
            .replacingOccurrences(of: "store.token_lifetime_s = 3600", with: "store.token_lifetime_s = 60")
            + "store.max_connections = 321\nstore.keepalive_ms = 0\nstore.bad_tokens_per_address = 3\n"
            + "gateway.max_connections = 5\n"
        try Deployment.writePrivate(path, text)
        let configuration = StoreConfiguration(deployment: try Deployment.open(temporary.directory), host: "127.0.0.1", port: 0)
        #expect(configuration.settings.maxPayloadBytes == 9_000)
        #expect(configuration.settings.tokenLifetimeMs == 60_000)
        #expect(configuration.settings.badTokensPerAddress == 3)
        #expect(configuration.limits.maxConnections == 321, "the gateway's key does not apply")
        #expect(configuration.limits.keepaliveMs == 0)
    }

    @Test("[8-4] an unknown user's LOGIN is checked against a hash of the deployment's password.iterations, the count its users' hashes have")
    func dummyHashFollowsTheDeployment() throws {
        let temporary = try TemporaryDeployment()
        #expect(TemporaryDeployment.passwordIterations != PasswordHash.defaultIterations, "the test deployment sets its own count")
        let configuration = StoreConfiguration(deployment: temporary.deployment, host: "127.0.0.1", port: 0)
        #expect(configuration.settings.passwordIterations == TemporaryDeployment.passwordIterations)
        #expect(PasswordHash.dummy(iterations: configuration.settings.passwordIterations).iterations == TemporaryDeployment.passwordIterations)
        let plain = StoreConfiguration(databasePath: "unused", serverKey: temporary.deployment.serverKey,
                                       providerKey: temporary.deployment.providerKey)
        #expect(plain.settings.passwordIterations == PasswordHash.defaultIterations)
    }

    @Test("without the keys the store keeps its defaults")
    func defaults() throws {
        let temporary = try TemporaryDeployment()
        let configuration = StoreConfiguration(deployment: temporary.deployment, host: "127.0.0.1", port: 0)
        let plain = StoreConfiguration(databasePath: "unused", serverKey: temporary.deployment.serverKey,
                                       providerKey: temporary.deployment.providerKey)
        #expect(configuration.limits.maxConnections == plain.limits.maxConnections)
        #expect(configuration.limits.keepaliveMs == plain.limits.keepaliveMs)
        #expect(configuration.settings.maxPayloadBytes == plain.settings.maxPayloadBytes)
    }

    @Test("the defaults ConfigSchema documents are the store's defaults")
    func documentedDefaults() throws {
        let temporary = try TemporaryDeployment()
        let plain = StoreConfiguration(databasePath: "unused", serverKey: temporary.deployment.serverKey,
                                       providerKey: temporary.deployment.providerKey)
        func documented(_ name: String) -> String? { ConfigSchema.key(named: name)?.key.defaultValue }
        #expect(documented("store.max_payload_bytes") == "\(plain.settings.maxPayloadBytes)")
        #expect(documented("store.token_lifetime_s") == "\(plain.settings.tokenLifetimeMs / 1000)")
        #expect(documented("store.bad_tokens_per_address") == "\(plain.settings.badTokensPerAddress)")
        #expect(documented("store.max_connections") == "\(plain.limits.maxConnections)")
        #expect(documented("store.keepalive_ms") == "\(plain.limits.keepaliveMs)")
        #expect(documented("handshake_timeout_ms") == "\(plain.limits.timeouts.handshakeMs)")
        #expect(documented("frame_timeout_ms") == "\(plain.limits.timeouts.frameMs)")
        #expect(documented("max_pending_handshakes") == "\(plain.limits.maxPendingHandshakes)")
        #expect(documented("max_pending_per_address") == "\(plain.limits.maxPendingPerAddress)")
        #expect(documented("password.iterations") == "\(PasswordHash.defaultIterations)")
    }
}
