import PushEventLoop
import PushWire
import Testing

extension EventLoopSuite {
    @Test func framedEchoKeepsOrderAndContent() throws {
        try withEventLoop { loop in
            let echo = EchoHandler()
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { $0.handler = echo }
            #expect(listener.port > 0)
            let client = PipelinedClient(total: 20_000, window: 64)
            client.done = { loop.stop() }
            Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port) { result in
                switch result {
                case .success(let connection):
                    connection.handler = client
                    client.start(connection)
                case .failure(let error):
                    Issue.record("connect failed: \(error)")
                    loop.stop()
                }
            }
            runLoop(loop)
            #expect(client.failures.isEmpty, "\(client.failures.prefix(3))")
            #expect(client.received == 20_000)
            #expect(echo.framesEchoed == 20_000)
        }
    }

    @Test func manyConnectionsAtOnce() throws {
        try withEventLoop { loop in
            let echo = EchoHandler()
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { $0.handler = echo }
            let count = 500
            var finished = 0
            var clients: [PipelinedClient] = []
            for _ in 0..<count {
                let client = PipelinedClient(total: 5, window: 5)
                client.done = {
                    finished += 1
                    if finished == count { loop.stop() }
                }
                clients.append(client)
                Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port) { result in
                    guard case .success(let connection) = result else {
                        Issue.record("connect failed: \(result)")
                        client.done()
                        return
                    }
                    connection.handler = client
                    client.start(connection)
                }
            }
            runLoop(loop)
            #expect(clients.allSatisfy { $0.succeeded })
            #expect(echo.framesEchoed == count * 5)
            #expect(loop.openConnectionCount == 2 * count + 0)
        }
    }

    @Test func framesSplitIntoSingleBytesArriveWhole() throws {
        try withEventLoop { loop in
            var frames: [(UInt32, [UInt8])] = []
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { connection in
                connection.callbacks.frame = { _, header, body in
                    frames.append((header.correlation, Array(body)))
                    if frames.count == 3 { loop.stop() }
                }
            }
            var stream: [UInt8] = []
            for correlation in UInt32(1)...3 {
                stream += makeFrame(correlation: correlation, body: patternBody(correlation * 10))
            }
            var writer: LoopTimer?
            Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port) { result in
                guard case .success(let connection) = result else {
                    Issue.record("connect failed")
                    loop.stop()
                    return
                }
                var offset = 0
                // One byte per loop iteration (TCP_NODELAY is on), so the server sees the
                // frames in many small reads.
                writer = loop.schedule(after: .microseconds(200), repeating: true) {
                    guard offset < stream.count else { return }
                    connection.write([stream[offset]])
                    offset += 1
                }
            }
            runLoop(loop)
            writer?.cancel()
            #expect(frames.map(\.0) == [1, 2, 3])
            for (correlation, body) in frames {
                #expect(body == patternBody(correlation * 10))
            }
        }
    }
}
