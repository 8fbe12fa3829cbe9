import ArgumentParser
import PushSession

/// The deadlines and pending-handshake caps both services take; each flag wins over the
/// config file key of the same name (`store.handshake_timeout_ms`, or the bare key for
/// every service).
struct ConnectionOptions: ParsableArguments {
    private static let defaults = ServiceLimits(name: "", served: [])

    @Option(help: ArgumentHelp(
        "Milliseconds from accept to HELLO_OK; a peer that has not completed HELLO by then gets GOAWAY TIMEOUT and is closed (default: \(ConnectionOptions.defaults.timeouts.handshakeMs)).",
        valueName: "ms"))
    var handshakeTimeoutMs: Int64?

    @Option(help: ArgumentHelp(
        "Milliseconds a frame may take from its first byte to its last before GOAWAY TIMEOUT (default: \(ConnectionOptions.defaults.timeouts.frameMs)).",
        valueName: "ms"))
    var frameTimeoutMs: Int64?

    @Option(help: ArgumentHelp(
        "Connections waiting for HELLO_OK at once; one more is closed unanswered (default: \(ConnectionOptions.defaults.maxPendingHandshakes)). They never take the slots of admitted peers.",
        valueName: "count"))
    var maxPendingHandshakes: Int?

    @Option(help: ArgumentHelp(
        "Connections from one source address waiting for HELLO_OK at once (default: \(ConnectionOptions.defaults.maxPendingPerAddress)).",
        valueName: "count"))
    var maxPendingPerAddress: Int?

    func validate() throws {
        if let handshakeTimeoutMs, handshakeTimeoutMs < 1 { throw ValidationError("--handshake-timeout-ms must be at least 1") }
        if let frameTimeoutMs, frameTimeoutMs < 1 { throw ValidationError("--frame-timeout-ms must be at least 1") }
        if let maxPendingHandshakes, maxPendingHandshakes < 1 { throw ValidationError("--max-pending-handshakes must be at least 1") }
        if let maxPendingPerAddress, maxPendingPerAddress < 1 { throw ValidationError("--max-pending-per-address must be at least 1") }
    }

    func apply(to limits: inout ServiceLimits) {
        if let handshakeTimeoutMs { limits.timeouts.handshakeMs = handshakeTimeoutMs }
        if let frameTimeoutMs { limits.timeouts.frameMs = frameTimeoutMs }
        if let maxPendingHandshakes { limits.maxPendingHandshakes = maxPendingHandshakes }
        if let maxPendingPerAddress { limits.maxPendingPerAddress = maxPendingPerAddress }
    }
}
