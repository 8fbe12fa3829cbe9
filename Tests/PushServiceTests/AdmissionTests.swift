import Logging
import PushEventLoop
import PushService
import PushSession
import PushTestSupport
import PushWire
import Testing

/// ServiceHost's admission in-process: pending caps, admitted slots, the frame limit before
/// HELLO_OK, and the refusals counted.
@Suite("ServiceHost admission", .ownThread)
struct AdmissionTests {
    static func limits(pending: Int = 8, perAddress: Int = 2, connections: Int = 10) -> ServiceLimits {
        var limits = ServiceLimits(name: "test-service", served: [.store])
        limits.maxPendingHandshakes = pending
        limits.maxPendingPerAddress = perAddress
        limits.maxConnections = connections
        limits.timeouts.handshakeMs = 30_000
        return limits
    }

    @Test("a connection over its address's pending cap is closed at once with no reply; another address is served")
    func perAddressCap() throws {
        let loop = try EventLoop()
        let service = HeldRequests(loop: loop, limits: Self.limits(perAddress: 2))
        try service.host.listen(host: "127.0.0.1", port: 0, tls: nil)
        let port = service.host.port ?? 0
        let held = (0..<2).map { _ in RecordingClient(loop: loop, port: port, from: "127.0.0.2") }
        #expect(loop.run(until: { service.host.pendingHandshakeCount == 2 }))
        let over = RecordingClient(loop: loop, port: port, from: "127.0.0.2")
        #expect(loop.run(until: { over.closed }))
        #expect(over.received.isEmpty, "refused with no reply")
        #expect(service.host.refusals(.pendingPerAddress) == 1)
        #expect(held.allSatisfy { !$0.closed })
        let good = RecordingClient(loop: loop, port: port, from: "127.0.0.3")
        #expect(loop.run(until: { good.connection != nil }))
        good.send(.hello(Hello(role: .provider)), correlation: 1)
        #expect(loop.run(until: { good.has(1) { $0.type == .helloOK } }))
        #expect(service.host.admittedCount == 1 && service.host.pendingHandshakeCount == 2)
        // A pending connection that goes away frees its address's slot.
        held[0].connection?.close()
        #expect(loop.run(until: { service.host.pendingHandshakeCount == 1 }))
        let again = RecordingClient(loop: loop, port: port, from: "127.0.0.2")
        #expect(loop.run(until: { service.host.pendingHandshakeCount == 2 }))
        #expect(!again.closed)
    }

    @Test("past the overall pending cap a new address is refused too, while admitted peers keep being served")
    func overallCap() throws {
        let loop = try EventLoop()
        let service = HeldRequests(loop: loop, limits: Self.limits(pending: 3, perAddress: 3))
        try service.host.listen(host: "127.0.0.1", port: 0, tls: nil)
        let port = service.host.port ?? 0
        let admitted = RecordingClient(loop: loop, port: port, from: "127.0.0.1")
        #expect(loop.run(until: { admitted.connection != nil }))
        admitted.send(.hello(Hello(role: .provider)), correlation: 1)
        #expect(loop.run(until: { admitted.has(1) { $0.type == .helloOK } }))
        let hostile = (0..<3).map { _ in RecordingClient(loop: loop, port: port, from: "127.0.0.4") }
        #expect(loop.run(until: { service.host.pendingHandshakeCount == 3 }))
        let refused = RecordingClient(loop: loop, port: port, from: "127.0.0.5")
        #expect(loop.run(until: { refused.closed }))
        #expect(service.host.refusals(.pendingHandshakes) == 1)
        admitted.send(.store(StoreRequest(user: "u", payload: [1])), correlation: 2)
        #expect(loop.run(until: { service.held.count == 1 }))
        service.answerAll()
        #expect(loop.run(until: { admitted.has(2) { $0.type == .recallOK } }))
        #expect(hostile.allSatisfy { !$0.closed })
    }

    @Test("maxConnections counts admitted peers only: silent connections take no slot; HELLO past it is ERROR BUSY")
    func connectionLimitCountsAdmittedOnly() throws {
        let loop = try EventLoop()
        let service = HeldRequests(loop: loop, limits: Self.limits(pending: 8, perAddress: 8, connections: 1))
        try service.host.listen(host: "127.0.0.1", port: 0, tls: nil)
        let port = service.host.port ?? 0
        let silent = (0..<4).map { _ in RecordingClient(loop: loop, port: port, from: "127.0.0.6") }
        #expect(loop.run(until: { service.host.pendingHandshakeCount == 4 }))
        let first = RecordingClient(loop: loop, port: port)
        #expect(loop.run(until: { first.connection != nil }))
        first.send(.hello(Hello(role: .provider)), correlation: 1)
        #expect(loop.run(until: { first.has(1) { $0.type == .helloOK } }), "four silent connections must not make the server BUSY")
        let second = RecordingClient(loop: loop, port: port)
        #expect(loop.run(until: { second.connection != nil }))
        second.send(.hello(Hello(role: .provider)), correlation: 1)
        #expect(loop.run(until: { second.closed }))
        #expect(second.has(1) { if case .error(let error) = $0 { error.status == .busy } else { false } })
        #expect(service.host.refusals(.connectionLimit) == 1)
        #expect(service.host.admittedCount == 1)
        #expect(silent.allSatisfy { !$0.closed })
    }

    @Test("a HELLO the service refuses gives back the connection slot it held while being decided")
    func refusedHelloFreesItsSlot() throws {
        let loop = try EventLoop()
        let service = HeldRequests(loop: loop, limits: Self.limits(pending: 8, perAddress: 8, connections: 1))
        try service.host.listen(host: "127.0.0.1", port: 0, tls: nil)
        let port = service.host.port ?? 0
        for _ in 0..<3 {
            // HeldRequests admits providers only: each device HELLO is refused by the service.
            let device = RecordingClient(loop: loop, port: port)
            #expect(loop.run(until: { device.connection != nil }))
            device.send(.hello(Hello(role: .device)), correlation: 1)
            #expect(loop.run(until: { device.has(1) { if case .error(let error) = $0 { error.status == .badCredentials } else { false } } }))
        }
        let provider = RecordingClient(loop: loop, port: port)
        #expect(loop.run(until: { provider.connection != nil }))
        provider.send(.hello(Hello(role: .provider)), correlation: 1)
        #expect(loop.run(until: { provider.has(1) { $0.type == .helloOK } }), "the refused HELLOs must not keep the only slot")
        #expect(service.host.refusals(.connectionLimit) == 0 && service.host.admittedCount == 1)
    }

    @Test("before HELLO_OK a frame over 1,024 bytes is GOAWAY FRAME_TOO_LARGE; after it the negotiated size applies")
    func frameLimitBeforeHello() throws {
        let loop = try EventLoop()
        let service = HeldRequests(loop: loop, limits: Self.limits())
        try service.host.listen(host: "127.0.0.1", port: 0, tls: nil)
        let port = service.host.port ?? 0
        let big = RecordingClient(loop: loop, port: port)
        #expect(loop.run(until: { big.connection != nil }))
        // Only the header of a 1,025-byte frame: refused on its length, the body never awaited.
        var header: [UInt8] = []
        FrameHeader(rawType: MessageType.hello.rawValue, correlation: 1, status: .ok, bodyLength: 1_025 - 16).write(into: &header)
        big.connection?.write(header)
        #expect(loop.run(until: { big.closed }))
        #expect(big.goawayStatus == .frameTooLarge)

        let good = RecordingClient(loop: loop, port: port)
        #expect(loop.run(until: { good.connection != nil }))
        good.send(.hello(Hello(role: .provider)), correlation: 1)
        #expect(loop.run(until: { good.has(1) { $0.type == .helloOK } }))
        good.send(.store(StoreRequest(user: "u", payload: Array(repeating: 1, count: 8_000))), correlation: 2)
        #expect(loop.run(until: { service.held.count == 1 }))
        #expect(!good.closed)
    }

    @Test("handshake timeouts and frame timeouts are counted")
    func timeoutsCounted() throws {
        let loop = try EventLoop()
        var limits = Self.limits()
        limits.timeouts = SessionTimeouts(handshakeMs: 200, frameMs: 200)
        let service = HeldRequests(loop: loop, limits: limits)
        try service.host.listen(host: "127.0.0.1", port: 0, tls: nil)
        let port = service.host.port ?? 0
        let silent = RecordingClient(loop: loop, port: port)
        let slow = RecordingClient(loop: loop, port: port)
        #expect(loop.run(until: { slow.connection != nil }))
        slow.send(.hello(Hello(role: .provider)), correlation: 1)
        #expect(loop.run(until: { slow.has(1) { $0.type == .helloOK } }))
        let frame = Message.store(StoreRequest(user: "u", payload: [1, 2, 3])).encoded(correlation: 2)
        slow.connection?.write(Array(frame.prefix(10)))
        #expect(loop.run(until: { silent.closed && slow.closed }))
        #expect(silent.goawayStatus == .timeout && slow.goawayStatus == .timeout)
        #expect(service.host.refusals(.handshakeTimeout) == 1)
        #expect(service.host.refusals(.frameTimeout) == 1)
        #expect(service.host.pendingHandshakeCount == 0 && service.host.admittedCount == 0)
    }
}
