import PushClient
import PushClock
import PushEventLoop
import PushWire

/// A securepush server that a test scripts frame by frame, on the test's own loop on
/// 127.0.0.1 (a free port the kernel picks): it records each connection and each message
/// it receives, and answers only what `onMessage` writes. `answerHandshake` gives the usual
/// HELLO_OK and PONG, for tests that script only the requests. Loop-confined.
final class ScriptedServer {
    /// One accepted connection.
    final class Peer {
        let index: Int
        let connection: Connection
        let acceptedAt: Int64
        /// Messages this connection received, with their correlation ids and when (monotonic ms), in order.
        var received: [(message: Message, correlation: UInt32, at: Int64)] = []

        init(index: Int, connection: Connection) {
            self.index = index
            self.connection = connection
            self.acceptedAt = Clocks.monotonicMilliseconds()
        }

        var isOpen: Bool { connection.isOpen }

        func send(_ message: Message, correlation: UInt32) {
            var bytes: [UInt8] = []
            message.encode(correlation: correlation, into: &bytes)
            _ = connection.write(bytes)
        }

        func close() { connection.close() }

        func closeAfterFlush() { connection.closeAfterFlush(timeout: .seconds(1)) }
    }

    private var listener: Listener?
    let port: Int
    private(set) var peers: [Peer] = []
    /// Each frame received (after it is recorded): the peer, the message, its correlation.
    var onMessage: ((Peer, Message, UInt32) -> Void)?
    var onAccept: ((Peer) -> Void)?
    /// Frames that did not decode, by peer index.
    private(set) var undecodable: [Int] = []

    init(loop: EventLoop) throws {
        var accept: ((Connection) -> Void)?
        let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { accept?($0) }
        self.listener = listener
        self.port = listener.port
        accept = { [weak self] connection in self?.accepted(connection) }
    }

    var endpoint: ServerLink.Endpoint { ServerLink.Endpoint(host: "127.0.0.1", port: port) }

    /// Stops listening and closes every connection.
    func stop() {
        listener?.close()
        listener = nil
        for peer in peers where peer.isOpen { peer.close() }
    }

    /// Every message of `type` received, on any connection, in arrival order.
    func messages(_ type: MessageType) -> [(peer: Int, message: Message, correlation: UInt32, at: Int64)] {
        peers.flatMap { peer in
            peer.received.filter { $0.message.type == type }.map { (peer.index, $0.message, $0.correlation, $0.at) }
        }.sorted { $0.at < $1.at }
    }

    private func accepted(_ connection: Connection) {
        let peer = Peer(index: peers.count, connection: connection)
        peers.append(peer)
        let callbacks = connection.callbacks
        callbacks.frame = { [weak self, weak peer] _, header, body in
            guard let self, let peer else { return }
            guard let message = try? Message.decode(header: header, body: body) else {
                self.undecodable.append(peer.index)
                return
            }
            peer.received.append((message, header.correlation, Clocks.monotonicMilliseconds()))
            self.onMessage?(peer, message, header.correlation)
        }
        onAccept?(peer)
    }

    /// HELLO_OK for HELLO and PONG for PING; true when it answered.
    @discardableResult
    static func answerHandshake(_ peer: Peer, _ message: Message, _ correlation: UInt32, maxInflight: UInt32 = 32) -> Bool {
        switch message {
        case .hello:
            peer.send(.helloOK(HelloOK(maxFrame: 65_536, keepaliveMs: 30_000, maxInflight: maxInflight)), correlation: correlation)
        case .ping:
            peer.send(.pong, correlation: correlation)
        default:
            return false
        }
        return true
    }
}
