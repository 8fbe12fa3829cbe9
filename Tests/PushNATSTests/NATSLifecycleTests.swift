import PushEventLoop
import PushNATS
import PushTestSupport
import Testing

@Suite(.ownThread, .enabled(if: NATSServer.testsEnabled, "nats-server is not installed"))
struct NATSLifecycleTests {
    @Test("publishing while disconnected fills the reconnect buffer, then fails with libnats' error instead of dropping")
    func reconnectBufferFull() async throws {
        let server = try await startServer()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let connection = try connected(loop, server)
        let log = EventLog(connection)
        server.stop()
        #expect(loop.run(until: { log.events.contains(.disconnected) }))
        let chunk = [UInt8](repeating: 1, count: 512 * 1024)
        var accepted = 0
        var failure: NATSError?
        while failure == nil, accepted < 40 {
            do throws(NATSError) {
                try connection.publish("buffered", chunk)
                accepted += 1
            } catch {
                failure = error
            }
        }
        #expect(accepted >= 8 && accepted <= 16, "\(accepted) chunks of 512 KiB accepted")
        guard case .library(_, let text)? = failure else {
            Issue.record("expected a library error, got \(String(describing: failure))")
            return
        }
        #expect(!text.isEmpty)
    }

    @Test("a handler may close its connection: nothing more is delivered, pending requests fail")
    func closeFromHandler() async throws {
        let server = try await startServer()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let sender = try connected(loop, server)
        let receiver = try connected(loop, server)
        var delivered = 0
        var pendingOutcome: Result<NATSMessage, NATSError>?
        try receiver.subscribe("svc.nobody.listens.here.x") { _ in }
        try receiver.subscribe("closing") { _ in
            delivered += 1
            receiver.close()
        }
        try settle(loop, receiver)
        // A responder that never answers: the request stays pending until the close, and
        // no "no responders" status can end it first.
        try sender.subscribe("svc.slow") { _ in }
        try settle(loop, sender)
        receiver.request("svc.slow", [], timeout: .seconds(30)) { pendingOutcome = $0 }
        for _ in 0..<100 { try sender.publish("closing", [1]) }
        #expect(loop.run(until: { pendingOutcome != nil }))
        #expect(delivered == 1)
        #expect(pendingOutcome?.failure == .notConnected)
    }

    @Test("the loop shutting down closes the connection and fails a pending request at once")
    func loopShutdown() async throws {
        let server = try await startServer()
        let loop = try EventLoop()
        let client = try connected(loop, server)
        let silent = try connected(loop, server)
        try silent.subscribe("svc.silent") { _ in }
        try settle(loop, silent)
        var outcome: Result<NATSMessage, NATSError>?
        client.request("svc.silent", [1], timeout: .seconds(30)) { outcome = $0 }
        loop.shutdown()
        #expect(outcome?.failure == .notConnected)
        #expect(!client.isConnected)
        client.close()
    }
}
