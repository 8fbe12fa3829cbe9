import PushEventLoop
import PushNATS
import PushTestSupport
import Testing

struct TimedOut: Error, CustomStringConvertible {
    var description: String
}

/// A fresh server, started off the cooperative pool.
func startServer() async throws -> NATSServer {
    try await onOwnThread { try NATSServer() }
}

/// Starts an asynchronous operation and runs `loop` until its completion has run.
func wait<T>(_ loop: EventLoop, timeoutSeconds: Double = 10, _ start: (@escaping (T) -> Void) -> Void) throws -> T {
    var outcome: T?
    start { outcome = $0 }
    guard loop.run(until: { outcome != nil }, timeoutSeconds: timeoutSeconds), let outcome else {
        throw TimedOut(description: "no completion within \(timeoutSeconds) s")
    }
    return outcome
}

/// A connection to `server`, connected (the loop ran until it was).
func connected(_ loop: EventLoop, _ server: NATSServer, name: String = "test") throws -> NATSConnection {
    let connection = try NATSConnection(loop: loop, servers: [server.url], name: name)
    guard loop.run(until: { connection.isConnected }) else { throw TimedOut(description: "not connected to \(server.url)") }
    return connection
}

/// Returns once the server has processed everything `connection` sent before: a request
/// nobody answers comes back as "no responders" only after the SUBs and PUBs ahead of it.
func settle(_ loop: EventLoop, _ connection: NATSConnection) throws {
    let result = try wait(loop) { connection.request("settle.nobody", [], timeout: .seconds(5), completion: $0) }
    guard case .failure(.noResponders) = result else { throw TimedOut(description: "settle: \(result)") }
}

/// Records a connection's events, in order.
final class EventLog {
    var events: [NATSConnectionEvent] = []

    init(_ connection: NATSConnection) {
        connection.onEvent = { [unowned self] in events.append($0) }
    }
}

extension JetStream {
    /// The stream's info reply (config and state), as raw JSON text.
    func info(_ loop: EventLoop, stream: String) throws -> String {
        let reply = try wait(loop) { connection.request("$JS.API.STREAM.INFO.\(stream)", [], timeout: .seconds(5), completion: $0) }.get()
        return String(decoding: reply.data, as: UTF8.self)
    }
}

extension StoredMessage {
    /// As stored, without the server's time stamp, which no test can predict.
    var withoutStoredTime: StoredMessage { StoredMessage(sequence: sequence, subject: subject, data: data) }
}
