import Logging
import PushEventLoop
import PushService
import PushSession
import PushTestSupport
import PushWire
import Testing

/// A service that answers every request at once with a 4,000-byte reply, as a store
/// answers FETCH, and can start frames of its own, as a gateway pushes.
final class BigReplies: ServiceHandler {
    typealias PeerState = Int
    static let reply = Message.fetchOK(FetchOK(id: PayloadID(high: 1, low: 2), payload: Array(repeating: 0x61, count: 4_000),
                                               createdAt: 0, expiresAt: 0))
    var host: ServiceHost<BigReplies>!
    var peer: ServicePeer<BigReplies>?
    var served = 0
    var closeReasons: [CloseReason] = []

    init(loop: EventLoop, limits: ServiceLimits) {
        host = ServiceHost(loop: loop, limits: limits, logger: .silent("test"), handler: self)
    }

    func admit(_ hello: Hello, peer: ServicePeer<BigReplies>) -> Admission<Int> { .admit(0) }

    func admitted(_ peer: ServicePeer<BigReplies>) { self.peer = peer }

    func serve(_ message: Message, correlation: UInt32, peer: ServicePeer<BigReplies>) {
        served += 1
        host.respond(BigReplies.reply, correlation: correlation, to: peer)
    }

    func closed(_ peer: ServicePeer<BigReplies>, reason: CloseReason) { closeReasons.append(reason) }
}

/// A client connection that counts the replies it reads and can stop reading.
final class CountingClient {
    var connection: Connection?
    var helloOK = false
    var replies = 0
    var closed = false
    /// The status of the GOAWAY the server sent, if it sent one.
    var goaway: Status?

    init(loop: EventLoop, port: Int) {
        Connection.connect(loop: loop, host: "127.0.0.1", port: port) { [self] result in
            guard case .success(let connection) = result else { closed = true; return }
            self.connection = connection
            connection.callbacks.frame = { [unowned self] _, header, body in
                if header.type == .helloOK { helloOK = true } else if header.type == .fetchOK { replies += 1 }
                if header.type == .goaway, case .goaway(let message)? = try? Message.decode(header: header, body: body) {
                    goaway = message.status
                }
            }
            connection.callbacks.close = { [unowned self] _, _ in closed = true }
        }
    }

    func send(_ message: Message, correlation: UInt32) {
        connection?.write(message.encoded(correlation: correlation))
    }
}

@Suite("ServiceHost back-pressure", .ownThread)
struct ServiceBackpressureTests {
    static func start(_ loop: EventLoop) throws -> (BigReplies, CountingClient) {
        var limits = ServiceLimits(name: "test-service", served: [.fetch])
        limits.maxInflight = 4_096
        let service = BigReplies(loop: loop, limits: limits)
        service.host.maxOutputBytes = 64 * 1024
        try service.host.listen(host: "127.0.0.1", port: 0, tls: nil)
        let client = CountingClient(loop: loop, port: service.host.port ?? 0)
        #expect(loop.run(until: { client.connection != nil }))
        client.send(.hello(Hello(role: .device)), correlation: 1)
        #expect(loop.run(until: { client.helloOK && service.peer != nil }))
        return (service, client)
    }

    @Test("a peer inside max_inflight whose replies pile up unread is paused, never cut, and gets every reply once it reads")
    func unreadRepliesPauseReading() throws {
        let loop = try EventLoop()
        let (service, client) = try Self.start(loop)
        // 16 MB of replies asked for, far more than the cap and the socket buffers hold.
        client.connection?.pauseReading()
        let requests = 4_000
        let fetch = Message.fetch(Fetch(id: PayloadID(high: 1, low: 2), token: [1]))
        for correlation in 2...UInt32(requests + 1) { client.send(fetch, correlation: correlation) }
        #expect(loop.run(until: { service.peer?.isHoldingReads == true }), "the server stopped reading")
        #expect(service.served < requests, "requests wait unread while replies are unread")
        #expect(service.closeReasons.isEmpty && !client.closed)

        client.connection?.resumeReading()
        #expect(loop.run(until: { client.replies == requests }, timeoutSeconds: 30), "\(client.replies) of \(requests) replies")
        #expect(service.served == requests)
        #expect(service.peer?.isHoldingReads == false, "reading resumed once the output drained")
        #expect(service.closeReasons.isEmpty && !client.closed, "the peer was never cut")
        #expect(service.host.connectionCount == 1)
        client.connection?.close()
        #expect(loop.run(until: { service.host.connectionCount == 0 }))
    }

    @Test("frames the server starts beyond the output cap cut the peer off as a slow consumer")
    func ownFramesOverTheCapAreSlowConsumer() throws {
        let loop = try EventLoop()
        let (service, client) = try Self.start(loop)
        client.connection?.pauseReading()
        let peer = try #require(service.peer)
        var sent = 0
        // The kernel takes what the socket buffers hold; the cap is hit after that.
        while sent < 10_000, service.host.send(BigReplies.reply, correlation: 0, to: peer) { sent += 1 }
        #expect(sent < 10_000, "a send was refused at the cap")
        #expect(service.closeReasons == [.slowConsumer])
        client.connection?.resumeReading()
        #expect(loop.run(until: { client.closed }), "the client reads what the kernel held, then the end")
    }

    @Test("[5.5-4] a peer the service cuts off as a slow consumer gets GOAWAY SLOW_CONSUMER past the cap, then the close, once it reads")
    func cutOffSendsGoaway() throws {
        let loop = try EventLoop()
        let (service, client) = try Self.start(loop)
        client.connection?.pauseReading()
        let peer = try #require(service.peer)
        // Frames of the server's own, up to the cap: the peer reads nothing. (Not replies:
        // requests the server then holds unread would make its close a reset, which
        // discards what the peer has not read yet.)
        var sent = 0
        while peer.connection.outputBufferedBytes + 8_000 < service.host.maxOutputBytes, sent < 10_000 {
            service.host.send(BigReplies.reply, correlation: 0, to: peer)
            sent += 1
        }
        #expect(peer.connection.outputBufferedBytes > 0, "output waits in the server")
        service.host.cutOff(peer, "left too much unread", timeout: .seconds(10))
        #expect(service.closeReasons.isEmpty, "closed only once the GOAWAY is read (or the timeout passes)")
        client.connection?.resumeReading()
        #expect(loop.run(until: { client.closed }, timeoutSeconds: 30))
        #expect(client.replies == sent, "every frame before the GOAWAY")
        #expect(client.goaway == .slowConsumer)
        #expect(service.closeReasons == [.local])
    }

    @Test("a peer held for unread replies that is then pushed to beyond the cap is cut as a slow consumer")
    func pushWhileHeld() throws {
        let loop = try EventLoop()
        let (service, client) = try Self.start(loop)
        client.connection?.pauseReading()
        let fetch = Message.fetch(Fetch(id: PayloadID(high: 1, low: 2), token: [1]))
        for correlation in 2...UInt32(4_001) { client.send(fetch, correlation: correlation) }
        #expect(loop.run(until: { service.peer?.isHoldingReads == true }))
        let peer = try #require(service.peer)
        #expect(service.closeReasons.isEmpty)
        // The output is somewhere above half the cap and the client still reads nothing.
        var sent = 0
        while sent < 1_000, service.host.send(BigReplies.reply, correlation: 0, to: peer) { sent += 1 }
        #expect(sent < 1_000, "a push was refused at the cap")
        #expect(service.closeReasons == [.slowConsumer])
        client.connection?.resumeReading()
        #expect(loop.run(until: { client.closed }))
    }
}
