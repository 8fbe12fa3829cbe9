import ArgumentParser

@main
struct SecurePush: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "securepush",
        abstract: "Secure push notifications: only an ID travels on the push path; devices fetch the payload over an authenticated connection.",
        discussion: """
        Each service is its own process, speaking the binary protocol of protocol/SPEC.md over TCP.

        Available now:
          init, user        create a deployment directory and its users
          store             the payload store (STORE, FETCH, SYNC, ACK, RECALL, STATUS)
          gateway           the push gateway (PUSH fan-out, offline queues, metrics)
          device enroll     issue a device's registration credential
          bench echo        framed echo over loopback through the event loop

        Coming with the next milestones:
          device run/login, send, status, recall   the device client and the provider's sender
          demo              the whole flow, end to end, in a temporary deployment
          conformance       the black-box protocol conformance suite
        """,
        version: SecurePush.version,
        subcommands: [InitCommand.self, UserCommand.self, StoreCommand.self, GatewayCommand.self, DeviceCommand.self,
                      SendCommand.self, StatusCommand.self, RecallCommand.self, DemoCommand.self, BenchCommand.self]
    )

    static let version = "0.1.0 (protocol 1)"
}
