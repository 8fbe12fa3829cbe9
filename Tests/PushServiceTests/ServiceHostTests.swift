import Logging
import PushEventLoop
import PushService
import PushSession
import PushTestSupport
import PushWire
import Testing

/// A service that admits every provider and answers STORE when the test says so.
final class HeldRequests: ServiceHandler {
    typealias PeerState = String
    var host: ServiceHost<HeldRequests>!
    var held: [(ServicePeer<HeldRequests>, UInt32)] = []
    var closedPeers = 0

    init(loop: EventLoop, limits: ServiceLimits) {
        host = ServiceHost(loop: loop, limits: limits, logger: Logger(label: "test"), handler: self)
    }

    func admit(_ hello: Hello, peer: ServicePeer<HeldRequests>) -> Admission<String> {
        hello.role == .provider ? .admit("provider") : .refuse(.badCredentials, "providers only")
    }

    func serve(_ message: Message, correlation: UInt32, peer: ServicePeer<HeldRequests>) {
        held.append((peer, correlation))
    }

    func answerAll() {
        for (peer, correlation) in held { host.respond(.recallOK(RecallOK(id: PayloadID(high: 0, low: 1))), correlation: correlation, to: peer) }
        held = []
    }

    func closed(_ peer: ServicePeer<HeldRequests>, reason: CloseReason) { closedPeers += 1 }
}

/// A raw client connection, from a chosen loopback source address, that records every
/// frame it receives.
final class RecordingClient {
    var connection: Connection?
    var received: [(UInt32, Message)] = []
    var closed = false

    init(loop: EventLoop, port: Int, from source: String = "127.0.0.1") {
        Connection.connect(loop: loop, host: "127.0.0.1", port: port, sourceAddress: source) { [self] result in
            guard case .success(let connection) = result else { closed = true; return }
            self.connection = connection
            connection.callbacks.frame = { [unowned self] _, header, body in
                if let message = try? Message.decode(header: header, body: body) { received.append((header.correlation, message)) }
            }
            connection.callbacks.close = { [unowned self] _, _ in closed = true }
        }
    }

    func send(_ message: Message, correlation: UInt32) {
        connection?.write(message.encoded(correlation: correlation))
    }

    /// The status of the first GOAWAY received, if any.
    var goawayStatus: Status? {
        for (_, message) in received { if case .goaway(let goaway) = message { return goaway.status } }
        return nil
    }

    func has(_ correlation: UInt32, _ match: (Message) -> Bool) -> Bool {
        received.contains { $0.0 == correlation && match($0.1) }
    }
}

/// ServiceHost in-process: the session's rules carried out over real sockets on one loop.
@Suite("ServiceHost in-process", .ownThread)
struct ServiceHostTests {
    static func limits(handshakeMs: Int64 = 10_000) -> ServiceLimits {
        var limits = ServiceLimits(name: "test-service", served: [.store])
        limits.maxInflight = 2
        limits.timeouts.handshakeMs = handshakeMs
        return limits
    }

    /// A service listening on a free port of 127.0.0.1 and a client connecting to it.
    static func started(_ limits: ServiceLimits = limits()) throws -> (EventLoop, HeldRequests, RecordingClient) {
        let loop = try EventLoop()
        let service = HeldRequests(loop: loop, limits: limits)
        try service.host.listen(host: "127.0.0.1", port: 0, tls: nil)
        return (loop, service, RecordingClient(loop: loop, port: service.host.port ?? 0))
    }

    @Test("[5.1-1] [5.3-4] HELLO_OK, a served request answered on its correlation, BUSY past max_inflight")
    func serveAndBusy() throws {
        let (loop, service, client) = try Self.started(Self.limits())
        #expect(loop.run(until: { client.connection != nil }))
        client.send(.hello(Hello(role: .provider)), correlation: 1)
        let store = Message.store(StoreRequest(user: "u", payload: [1]))
        for correlation in UInt32(2)...4 { client.send(store, correlation: correlation) }
        #expect(loop.run(until: { client.has(4) { $0.type == .error } }))
        #expect(client.has(1) { $0.type == .helloOK })
        #expect(service.held.map(\.1) == [2, 3])
        service.answerAll()
        #expect(loop.run(until: { client.has(2) { $0.type == .recallOK } && client.has(3) { $0.type == .recallOK } }))
        client.send(store, correlation: 5)
        #expect(loop.run(until: { service.held.count == 1 }))
        client.connection?.close()
        #expect(loop.run(until: { service.closedPeers == 1 && service.host.connectionCount == 0 }))
    }

    @Test("[5.5-1] a drain says GOAWAY SHUTTING_DOWN, still sends the owed reply, then closes and reports drained")
    func drain() throws {
        let (loop, service, client) = try Self.started(Self.limits())
        #expect(loop.run(until: { client.connection != nil }))
        client.send(.hello(Hello(role: .provider)), correlation: 1)
        client.send(.store(StoreRequest(user: "u", payload: [1])), correlation: 2)
        #expect(loop.run(until: { service.held.count == 1 }))
        var drained = false
        service.host.drain { drained = true }
        #expect(loop.run(until: { client.received.contains { if case .goaway(let goaway) = $0.1 { goaway.status == .shuttingDown && goaway.lastCorrelation == 2 } else { false } } }))
        #expect(!drained && !client.closed)
        service.answerAll()
        #expect(loop.run(until: { drained && client.closed }))
        #expect(client.has(2) { $0.type == .recallOK })
    }

    @Test("a peer that never completes HELLO is sent GOAWAY TIMEOUT at the handshake deadline and closed")
    func handshakeDeadline() throws {
        let (loop, service, client) = try Self.started(Self.limits(handshakeMs: 300))
        #expect(loop.run(until: { client.closed }))
        #expect(client.received.contains { if case .goaway(let goaway) = $0.1 { goaway.status == .timeout } else { false } })
        #expect(service.closedPeers == 0, "a peer never admitted is not the service's to close")
    }

    @Test("[4.2-4] a refused credential is ERROR, then close")
    func refused() throws {
        let (loop, service, client) = try Self.started(Self.limits())
        #expect(loop.run(until: { client.connection != nil }))
        client.send(.hello(Hello(role: .device)), correlation: 1)
        #expect(loop.run(until: { client.closed }))
        #expect(client.has(1) { if case .error(let error) = $0 { error.status == .badCredentials } else { false } })
    }
}

extension ServiceHostTests {
    @Test("a frame that has started must finish within the frame deadline, however the bytes trickle")
    func frameDeadline() throws {
        var limits = Self.limits()
        limits.timeouts.frameMs = 300
        let (loop, service, client) = try Self.started(limits)
        #expect(loop.run(until: { client.connection != nil }))
        client.send(.hello(Hello(role: .provider)), correlation: 1)
        #expect(loop.run(until: { client.has(1) { $0.type == .helloOK } }))
        // Half of a STORE, then one more byte every 50 ms: bytes keep coming, the frame never ends.
        let frame = Message.store(StoreRequest(user: "u", payload: Array(repeating: 7, count: 64))).encoded(correlation: 2)
        client.connection?.write(Array(frame[..<(frame.count / 2)]))
        var offset = frame.count / 2
        let trickle = loop.schedule(after: .milliseconds(50), repeating: true) {
            guard offset < frame.count - 1 else { return }
            client.connection?.write([frame[offset]])
            offset += 1
        }
        #expect(loop.run(until: { client.closed }))
        trickle.cancel()
        #expect(client.received.contains { if case .goaway(let goaway) = $0.1 { goaway.status == .timeout && goaway.lastCorrelation == 1 } else { false } })
        #expect(service.held.isEmpty)
    }
}
