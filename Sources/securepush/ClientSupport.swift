import PushClient
import PushEventLoop
import PushSecurity
import PushWire

/// Runs a loop until `body` reports a result, or fails after `timeoutSeconds`.
func runUntilDone<T>(timeoutSeconds: Double, what: String,
                     _ body: (EventLoop, @escaping (Result<T, CommandFailure>) -> Void) throws -> Void) throws -> T {
    let loop = try EventLoop()
    var outcome: Result<T, CommandFailure>?
    try body(loop) { result in
        guard outcome == nil else { return }
        outcome = result
        loop.stop()
    }
    let timer = loop.schedule(after: .milliseconds(Int64(timeoutSeconds * 1000))) {
        if outcome == nil { outcome = .failure(CommandFailure("timed out after \(Int(timeoutSeconds)) s waiting for \(what)")) }
        loop.stop()
    }
    if outcome == nil { loop.run() }
    timer.cancel()
    loop.shutdown()
    guard let outcome else { throw CommandFailure("\(what) did not finish") }
    return try outcome.get()
}

func endpoint(_ address: HostPort, caFile: String?) throws -> ServerLink.Endpoint {
    guard let caFile else { return ServerLink.Endpoint(host: address.host, port: address.port) }
    do {
        return ServerLink.Endpoint(host: address.host, port: address.port, tls: try TLSContext.client(caFile: caFile))
    } catch {
        throw CommandFailure("TLS: \(error)")
    }
}

/// The failure a command reports for a client error, in one line.
func describe(_ error: ClientError, talkingTo service: String, at address: HostPort) -> CommandFailure {
    switch error {
    case .connect: CommandFailure("cannot reach the \(service) at \(address): \(error)")
    case .refused(.badCredentials, _): CommandFailure("the \(service) refused our credential: check the key or credential file")
    default: CommandFailure("\(service): \(error)")
    }
}
