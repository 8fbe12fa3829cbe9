import Testing
import PushClient
import PushGateway
import PushSecurity
import PushTestSupport
import PushWire

/// The bound of remembered once ids ([4.13-12]): `--once-memory`, `gateway.once_memory`.
@Suite("The gateway's once memory setting", .ownThread)
struct GatewayOnceSettingsTests {
    @Test("gateway.once_memory sets the bound; without it the default is the documented one")
    func configKey() throws {
        let temporary = try TemporaryDeployment()
        let plain = GatewayConfiguration(serverKey: temporary.deployment.serverKey, providerKey: temporary.deployment.providerKey)
        #expect(plain.onceMemory == 100_000)
        #expect(ConfigSchema.key(named: "gateway.once_memory")?.key.defaultValue == "\(plain.onceMemory)")
        #expect(GatewayConfiguration(deployment: temporary.deployment, host: "127.0.0.1", port: 0).onceMemory == plain.onceMemory)
        let path = temporary.directory + "/" + Deployment.configFile
        try Deployment.writePrivate(path, try Deployment.readFile(path) + "gateway.once_memory = 5\n")
        #expect(GatewayConfiguration(deployment: try Deployment.open(temporary.directory), host: "127.0.0.1", port: 0).onceMemory == 5)
        try Deployment.writePrivate(path, try Deployment.readFile(path) + "gateway.once_memory = 0\n")
        #expect(throws: (any Error).self, "0 is out of range") { try Deployment.open(temporary.directory) }
    }

    @Test("--once-memory is documented with its default, and 0 is refused")
    func flagHelp() throws {
        let help = try SecurePushBinary.run(["gateway", "--help"])
        #expect(help.stdout.contains("--once-memory"))
        #expect(help.stdout.contains("default: 100000"), "\(help.stdout)")
        #expect(help.stdout.contains("gateway.once_memory"), "the config key is listed")
        let bad = try SecurePushBinary.run(["gateway", "--data-dir", "/nonexistent", "--once-memory", "0"])
        #expect(bad.status != 0 && bad.stderr.contains("--once-memory"))
    }

    @Test("[4.13-12] --once-memory 2: the gateway forgets the oldest of three ids, whose repeat is then new")
    func flagBoundsTheMemory() throws {
        let gateway = try GatewayProcess(arguments: ["--loops", "1", "--once-memory", "2", "--metrics", "127.0.0.1:0"])
        let phone = try gateway.device("phone")
        let provider = try gateway.provider()
        for id in ["a", "b", "c"] {
            #expect(try provider.push(.device("phone"), id: id, once: true) == PushAck(written: 1, queued: 0))
        }
        #expect(try provider.push(.device("phone"), id: "c", once: true) == PushAck(written: 1, queued: 0), "remembered")
        #expect(try provider.push(.device("phone"), id: "a", once: true) == PushAck(written: 1, queued: 0), "forgotten: new")
        #expect(try gateway.push(.device("phone"), id: "end", via: provider) == PushAck(written: 1, queued: 0))
        #expect(phone.pushIDs(until: "end") == ["a", "b", "c", "a", "end"])
        var text = ""
        #expect(waitUntil {
            text = (try? gateway.scrapeMetrics()) ?? ""
            return text.contains("securepush_gateway_once_ids_remembered 2")
        }, "\(text.split(separator: "\n").filter { $0.contains("once") })")
        #expect(text.contains("securepush_gateway_pushes_repeated_total 1"))
    }
}
