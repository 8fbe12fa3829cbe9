import Glibc
import PushEventLoop
import PushWire
import Testing

/// Connection handoff between loops (Connection.handOff / Connection.adopt): a connection
/// accepted on one loop moves, inside the handler's onFrame of its first frame, to a loop
/// on another thread, with the rest of that read, and goes on there on the same socket.
extension EventLoopSuite {
    @Test(arguments: [false, true])
    func handOffInsideOnFrameMovesTheRestOfTheReadToTheOtherLoop(tls: Bool) throws {
        let certificate = tls ? try TemporaryCertificate() : nil
        defer { certificate?.remove() }
        let serverTLS = try certificate.map { try TLSContext.server(certificateFile: $0.certificate, privateKeyFile: $0.key) }
        let clientTLS = try certificate.map { try TLSContext.client(caFile: $0.certificate) }
        // First batch: about 100 KB in one write, more than one 64 KB read, so the handoff
        // happens with whole and partial frames left in that read and more in the socket.
        // The second batch is read from the socket by the adopting loop only.
        let maxBody = 2_000
        let client = BatchClient(batches: [100, 20], maxBody: maxBody)
        let log = AdoptionLog()
        let adopter = try EventLoopThread(name: "test-adopter")
        let server = HandingOffServer(target: adopter.handle, log: log, maxBody: maxBody)

        try withEventLoop { loop in
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0, tls: serverTLS) { $0.handler = server }
            client.done = { loop.stop() }
            Connection.connect(
                loop: loop, host: "127.0.0.1", port: listener.port, tls: clientTLS, serverName: "127.0.0.1"
            ) { result in
                guard case .success(let connection) = result else {
                    Issue.record("connect failed: \(result)")
                    loop.stop()
                    return
                }
                connection.handler = client
                client.sendBatch(connection)
            }
            runLoop(loop)
            #expect(loop.openConnectionCount == 1, "only the client's connection is left on the first loop")
        }
        adopter.shutdown()
        #expect(adopter.handle.liveConnectionObjects == 0, "Connection objects leaked on the adopting loop")

        #expect(client.failures.isEmpty, "\(client.failures.prefix(3))")
        #expect(client.received == client.total)
        #expect(server.framesAfterHandOff == 0, "a frame reached the old handler after handOff")
        #expect(server.closeReasons.isEmpty, "the old handler got onClose: \(server.closeReasons)")
        #expect(!server.oldConnectionStillOpen)
        #expect(!server.postRefused)
        // The prepended frame and bytes left over from the read that carried it.
        if case .some(.some(let count)) = server.outcome {
            #expect(count > server.firstFrameSize)
        } else {
            Issue.record("handOff completed with \(String(describing: server.outcome))")
        }
        let record = log.record.withLock { $0 }
        #expect(record.adoptFailures == 0)
        #expect(record.correlations == Array(0..<client.total), "frames on the adopting loop out of order or missing")
        #expect(record.badBodies == 0)
        #expect(record.offLoopThread == 0)
    }

    @Test func handOffWithOutputQueuedYieldsNilAndClosesNormally() throws {
        let log = AdoptionLog()
        let adopter = try EventLoopThread(name: "test-adopter")
        let server = HandingOffServer(target: adopter.handle, log: log, maxBody: 0)
        // More than the loopback socket buffers take while the client reads nothing.
        let flood = [UInt8](repeating: 7, count: 32 << 20)
        server.prepare = { connection in
            connection.maxOutputBytes = 64 << 20
            connection.write(flood)
        }
        var clientReason: CloseReason?
        try withEventLoop { loop in
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { $0.handler = server }
            Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port) { result in
                guard case .success(let connection) = result else {
                    Issue.record("connect failed: \(result)")
                    loop.stop()
                    return
                }
                // Reads nothing, so the flood stays queued on the server.
                connection.pauseReading()
                connection.callbacks.close = { _, reason in
                    clientReason = reason
                    loop.stop()
                }
                connection.write(makeFrame(correlation: 0, body: [1, 2, 3]))
            }
            let stopWhenReported = loop.schedule(after: .milliseconds(5), repeating: true) {
                if server.outcome != nil, !server.closeReasons.isEmpty { loop.stop() }
            }
            runLoop(loop)
            stopWhenReported.cancel()
        }
        adopter.shutdown()
        #expect(server.handedOff)
        if case .some(.none) = server.outcome {} else {
            Issue.record("expected a nil handoff, got \(String(describing: server.outcome))")
        }
        #expect(server.closeReasons == [.local])
        #expect(!server.oldConnectionStillOpen)
        #expect(clientReason == nil || clientReason == .loopShutdown || clientReason == .peerClosed)
        #expect(log.record.withLock { $0.correlations.isEmpty })
        #expect(adopter.handle.liveConnectionObjects == 0)
    }

    /// A loop that refuses the post (it has shut down) drops the handoff, which must close
    /// the socket: the client sees its connection end.
    @Test(arguments: [false, true])
    func aDroppedHandoffClosesTheSocket(tls: Bool) throws {
        let certificate = tls ? try TemporaryCertificate() : nil
        defer { certificate?.remove() }
        let serverTLS = try certificate.map { try TLSContext.server(certificateFile: $0.certificate, privateKeyFile: $0.key) }
        let clientTLS = try certificate.map { try TLSContext.client(caFile: $0.certificate) }
        let log = AdoptionLog()
        let gone = try EventLoopThread(name: "test-gone")
        gone.shutdown()
        let server = HandingOffServer(target: gone.handle, log: log, maxBody: 200)
        var clientReason: CloseReason?
        try withEventLoop { loop in
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0, tls: serverTLS) { $0.handler = server }
            Connection.connect(
                loop: loop, host: "127.0.0.1", port: listener.port, tls: clientTLS, serverName: "127.0.0.1"
            ) { result in
                guard case .success(let connection) = result else {
                    Issue.record("connect failed: \(result)")
                    loop.stop()
                    return
                }
                connection.callbacks.close = { _, reason in
                    clientReason = reason
                    loop.stop()
                }
                connection.write(makeFrame(correlation: 0, body: patternBody(0)) + makeFrame(correlation: 1, body: patternBody(1)))
            }
            runLoop(loop)
            #expect(loop.openConnectionCount == 0)
        }
        #expect(server.postRefused)
        #expect(clientReason == .peerClosed)
        #expect(server.closeReasons.isEmpty, "the old handler got onClose: \(server.closeReasons)")
        if case .some(.some(let count)) = server.outcome {
            #expect(count > server.firstFrameSize)
        } else {
            Issue.record("handOff completed with \(String(describing: server.outcome))")
        }
    }

    @Test func handOffOfAConnectionThatIsNotOpenYieldsNil() throws {
        var outcome: ConnectionHandoff??
        var reasons: [CloseReason] = []
        try withEventLoop { loop in
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { connection in
                connection.callbacks.close = { _, reason in reasons.append(reason) }
                connection.close()
                connection.handOff { handoff in
                    outcome = .some(handoff)
                    loop.stop()
                }
            }
            Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port) { _ in }
            runLoop(loop)
        }
        if case .some(.none) = outcome {} else { Issue.record("expected nil, got \(String(describing: outcome))") }
        #expect(reasons == [.local])
    }
}
