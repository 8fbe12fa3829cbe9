import Glibc
import PushClock
import PushEventLoop
import PushNATS
import PushTestSupport
import Testing

@Suite(.ownThread, .enabled(if: NATSServer.testsEnabled, "nats-server is not installed"))
struct NATSReconnectTests {
    @Test("a restarted server (same port and store): .disconnected, then .reconnected, and the old subscriptions work again")
    func serverRestart() async throws {
        let server = try await startServer()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let sender = try connected(loop, server, name: "sender")
        let receiver = try connected(loop, server, name: "receiver")
        let log = EventLog(receiver)
        var received: [[UInt8]] = []
        try receiver.subscribe("restart.test") { received.append($0.data) }
        try settle(loop, receiver)
        try sender.publish("restart.test", [1])
        #expect(loop.run(until: { received.count == 1 }))

        server.stop()
        #expect(loop.run(until: { log.events.contains(.disconnected) }))
        #expect(!receiver.isConnected)
        // Kept in the reconnect buffer and sent once the link is back.
        try sender.publish("restart.test", [2])
        try server.restart()
        #expect(loop.run(until: { log.events.contains(.reconnected) && sender.isConnected }))
        #expect(log.events == [.connected, .disconnected, .reconnected] || log.events == [.disconnected, .reconnected])
        #expect(receiver.statistics.reconnects >= 1)
        try settle(loop, receiver)
        try sender.publish("restart.test", [3])
        #expect(loop.run(until: { received.contains([3]) }))
        // [2] may arrive (if the receiver's SUB reached the new server first) or not; order holds.
        #expect(received.first == [1] && received.last == [3])
    }

    @Test("a connection made before its server exists connects once the server comes up")
    func serverComesUpLater() async throws {
        let server = try await startServer()
        server.stop()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let connection = try NATSConnection(loop: loop, servers: [server.url], name: "early")
        let log = EventLog(connection)
        var received = 0
        try connection.subscribe("early.bird") { _ in received += 1 }
        #expect(!connection.isConnected)
        #expect(!loop.run(until: { connection.isConnected }, timeoutSeconds: 0.5))
        try server.restart()
        #expect(loop.run(until: { log.events == [.connected] }))
        // The subscription made while disconnected took effect.
        let sender = try connected(loop, server)
        try settle(loop, connection)
        try sender.publish("early.bird", [1])
        #expect(loop.run(until: { received == 1 }))
    }

    @Test("a server killed and restarted over and over leaves no socket behind")
    func noDescriptorLeak() async throws {
        let server = try await startServer()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let connection = try connected(loop, server)
        let log = EventLog(connection)
        for round in 1...3 {
            server.kill()
            #expect(loop.run(until: { log.events.filter { $0 == .disconnected }.count == round }))
            try server.restart()
            #expect(loop.run(until: { log.events.filter { $0 == .reconnected }.count == round }))
        }
        try settle(loop, connection)
        // A socket libnats left open after the server went away would sit in CLOSE_WAIT.
        #expect(socketsTo(port: server.port) == ["01"])
        connection.close()
        #expect(loop.run(until: { log.events.last == .closed }))
    }

    @Test("a server that stops answering without closing the socket is noticed by the pings: .disconnected within interval × (max outstanding + 1), requests fail at once meanwhile, and it reconnects when the server answers again")
    func silentServerNoticed() async throws {
        let server = try await startServer()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let connection = try NATSConnection(loop: loop, servers: [server.url], name: "pinging",
                                            ping: NATSConnection.PingSettings(interval: .milliseconds(300), maxOutstanding: 2))
        let log = EventLog(connection)
        #expect(loop.run(until: { connection.isConnected }))
        try settle(loop, connection)
        server.pause()
        defer { server.resume() }
        let pausedAt = Clocks.monotonicMilliseconds()
        #expect(loop.run(until: { log.events.contains(.disconnected) }, timeoutSeconds: 5))
        let noticedMs = Clocks.monotonicMilliseconds() - pausedAt
        #expect(noticedMs < 1_500, "noticed after \(noticedMs) ms")
        #expect(Clocks.monotonicMilliseconds() - connection.lastInboundMs >= noticedMs - 400, "nothing came in since the pause")
        // Not left in the reconnect buffer to reach the server after the caller gave up.
        let startedMs = Clocks.monotonicMilliseconds()
        let result = try wait(loop) { connection.request("nobody.home", [], timeout: .seconds(5), completion: $0) }
        guard case .failure(.notConnected) = result else {
            Issue.record("a request while disconnected: \(result)")
            return
        }
        #expect(Clocks.monotonicMilliseconds() - startedMs < 1_000, "failed at once")
        server.resume()
        #expect(loop.run(until: { log.events.contains(.reconnected) }, timeoutSeconds: 10))
        try settle(loop, connection)
    }
}

/// The TCP states (as /proc/net/tcp writes them: 01 established, 08 close-wait) of the
/// sockets on this machine connected to `port` on 127.0.0.1, TIME_WAIT left out (no
/// descriptor holds those).
func socketsTo(port: Int) -> [String] {
    guard let file = fopen("/proc/net/tcp", "r") else { return ["unreadable"] }
    defer { fclose(file) }
    let wanted = ":" + String(port, radix: 16, uppercase: true).leftPadded(to: 4)
    var states: [String] = []
    var line: UnsafeMutablePointer<CChar>?
    var capacity = 0
    defer { free(line) }
    while getline(&line, &capacity, file) > 0, let line {
        let fields = String(cString: line).split(separator: " ")
        guard fields.count > 3, fields[2].hasSuffix(wanted), fields[3] != "06" else { continue }
        states.append(String(fields[3]))
    }
    return states
}

extension String {
    func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: max(0, width - count)) + self
    }
}
