import ArgumentParser

@main
struct SecurePush: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "securepush",
        abstract: "Secure push notifications: only an ID travels on the push path; devices fetch the payload over an authenticated connection.",
        discussion: """
        Each service is its own process, speaking the binary protocol of protocol/SPEC.md over TCP.

        Start with `securepush demo`: the whole flow in a temporary deployment.

        Deployment:   init, user add/remove/list, key rotate/status/prune
        Services:     store, gateway (each prints `listening on HOST:PORT` when ready)
        Devices:      device enroll, device list, device revoke, device run, device login, device logout
        Providers:    send, status, recall, provider token create/list/revoke, provider keys
        Tools:        bench (load tests), conformance (black-box protocol suite)
        """,
        version: SecurePush.version,
        subcommands: [InitCommand.self, UserCommand.self, KeyCommand.self, StoreCommand.self, GatewayCommand.self, DeviceCommand.self,
                      ProviderCommand.self, SendCommand.self, StatusCommand.self, RecallCommand.self, DemoCommand.self, BenchCommand.self, ConformanceCommand.self]
    )

    static let version = "0.1.0 (protocol 1)"
}
