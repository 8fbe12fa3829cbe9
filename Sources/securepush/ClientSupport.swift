import PushClient
import PushEventLoop
import PushSecurity
import PushSession
import PushWire
#if canImport(Glibc)
import Glibc
import PushClock
#endif

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
        if outcome == nil { outcome = .failure(CommandFailure("timed out after \(seconds(timeoutSeconds)) s waiting for \(what)")) }
        loop.stop()
    }
    if outcome == nil { loop.run() }
    timer.cancel()
    loop.shutdown()
    guard let outcome else { throw CommandFailure("\(what) did not finish") }
    return try outcome.get()
}

/// How long a one-shot command waits for HELLO_OK: well inside its own deadline, so a
/// server that never answers HELLO (a TLS server reached with plain TCP) is reported as
/// such rather than as a timeout.
func helloTimeoutMs(commandTimeoutSeconds: Double) -> Int64 {
    max(500, Int64(commandTimeoutSeconds * 1000 * 0.8))
}

/// `10`, or `2.5`: seconds as a person writes them.
func seconds(_ value: Double) -> String {
    value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
}

func endpoint(_ address: HostPort, caFile: String?) throws -> ServerLink.Endpoint {
    try endpoint(AddressList(address), caFile: caFile)
}

/// Several addresses of one service, tried in order (`HOST:PORT,HOST:PORT`).
func endpoint(_ addresses: AddressList, caFile: String?) throws -> ServerLink.Endpoint {
    guard let caFile else { return ServerLink.Endpoint(addresses) }
    do {
        return ServerLink.Endpoint(addresses, tls: try TLSContext.client(caFile: caFile))
    } catch {
        throw CommandFailure("cannot use --ca-file: \(error)")
    }
}

/// `--store`'s value: one address or several, comma-separated; a bad element is named in
/// the error ArgumentParser prints (exit 64).
func parseStoreAddresses(_ text: String) throws -> AddressList {
    try parseAddresses(text, flag: "--store", service: "store")
}

/// `--gateway`'s value for clients: one gateway or several nodes of a cluster, comma-separated.
func parseGatewayAddresses(_ text: String) throws -> AddressList {
    try parseAddresses(text, flag: "--gateway", service: "gateway")
}

private func parseAddresses(_ text: String, flag: String, service: String) throws -> AddressList {
    let parsed = Result { () throws(AddressListError) -> AddressList in try AddressList(parsing: text) }
    switch parsed {
    case .success(let list):
        return list
    case .failure(let error) where error.portIsZero:
        throw CommandFailure("\(flag) needs the \(service)'s port, not 0" + (error.count > 1 ? " (address \(error.position) of \(error.count))" : ""))
    case .failure(let error):
        throw error
    }
}

/// What `--store` (and `gateway.store`) say in `--help` about taking several addresses.
let addressListHelp = "Several stores over one database may be given comma-separated, as HOST:PORT,HOST:PORT: they are tried in order, and the client moves to the next when one fails."

/// What a client's `--gateway` says in `--help` about the nodes of a cluster.
let gatewayListHelp = "The nodes of a gateway cluster may be given comma-separated, as HOST:PORT,HOST:PORT: they are tried in order, and the client moves to the next when one fails."

/// The failure of a one-shot command once every address of a service failed in a row:
/// with one address, as `describe` says it; with several, each address and its failure.
func describe(_ failures: [AddressFailure], talkingTo service: String, tls: Bool = false) -> CommandFailure {
    guard failures.count > 1 else {
        guard let failure = failures.first else { return CommandFailure("cannot reach the \(service)") }
        return describe(failure.error, talkingTo: service, at: failure.address, tls: tls)
    }
    let each = failures.map { describe($0.error, talkingTo: service, at: $0.address, tls: tls).description }
    return CommandFailure("none of the \(failures.count) \(service) addresses answered: " + each.joined(separator: "; "))
}

/// The failure a command reports for a client error, in one line that says what to do
/// where there is something to do. `tls`: whether the connection was made with TLS.
func describe(_ error: ClientError, talkingTo service: String, at address: HostPort, tls: Bool = false) -> CommandFailure {
    let server = "the \(service) at \(address)"
    return switch error {
    case .connect(.tls(let message)) where message.hasPrefix("certificate verify failed"):
        CommandFailure("\(server) failed TLS verification: \(message) (is --ca-file the CA that signed its certificate?)")
    case .connect(.tls(let message)):
        CommandFailure("the TLS handshake with \(server) failed: \(message)")
    case .connect(.notTLS(let message)):
        CommandFailure("\(server) does not speak TLS (\(message)): leave out --ca-file")
    case .connect(.closedDuringHandshake):
        CommandFailure("\(server) closed the connection during the TLS handshake: is it a TLS server?")
    case .connect(let failure):
        CommandFailure("cannot reach \(server): \(failure)")
    case .serverSpeaksTLS:
        CommandFailure("\(server) speaks TLS: pass --ca-file")
    case .noHelloReply(let closed) where !tls:
        CommandFailure("\(server) \(closed ? "closed the connection during the handshake" : "did not answer HELLO"); "
                       + "it may be a TLS server: pass --ca-file")
    case .noHelloReply(let closed):
        CommandFailure("\(server) \(closed ? "closed the connection during the handshake" : "did not answer HELLO")")
    case .refused(.badCredentials, let text):
        CommandFailure("\(server) refused our credential" + (text.map { " (\($0))" } ?? "") + ": check the key or credential file")
    case .refused(let status, let text):
        CommandFailure("\(server) refused the connection: \(status)" + (text.map { " (\($0))" } ?? ""))
    case .goaway(let status, let text):
        CommandFailure("\(server) closed the connection: \(ClientError.goawayReason(status, text))")
    case .status(let status, let text):
        CommandFailure("the \(service) answered \(status)" + (text.map { ": \($0)" } ?? ""))
    case .disconnected:
        CommandFailure("\(server): connection lost")
    case .notSecurePush:
        CommandFailure("\(server): \(error): is this the \(service)'s address?")
    default:
        CommandFailure("\(server): \(error)")
    }
}

/// A wall-clock time in milliseconds since the epoch as ISO 8601 in local time, to the
/// second, with the offset: `2025-06-01T14:03:22+02:00`.
func localTime(milliseconds: UInt64) -> String {
    var seconds = time_t(clamping: milliseconds / 1000)
    var parts = tm()
    guard localtime_r(&seconds, &parts) != nil else { return "\(milliseconds) ms since the epoch" }
    func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
    let offsetMinutes = parts.tm_gmtoff / 60
    let sign = offsetMinutes < 0 ? "-" : "+"
    let offset = "\(sign)\(two(abs(offsetMinutes) / 60)):\(two(abs(offsetMinutes) % 60))"
    let year = Int(parts.tm_year) + 1900
    let date = "\(year)-\(two(Int(parts.tm_mon) + 1))-\(two(Int(parts.tm_mday)))"
    return "\(date)T\(two(Int(parts.tm_hour))):\(two(Int(parts.tm_min))):\(two(Int(parts.tm_sec)))\(offset)"
}

/// Now, as `localTime(milliseconds:)` writes it.
func localTimeNow() -> String {
    localTime(milliseconds: Clocks.wallMilliseconds())
}
