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

    @Test func largeFramesSpanningBufferChunksArriveWhole() throws {
        try withEventLoop { loop in
            let echo = EchoHandler()
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { $0.handler = echo }
            // Bodies up to the default 64 KiB frame limit: most span several read chunks.
            let client = PipelinedClient(total: 100, window: 3, maxBody: FrameLimits.defaultMaxFrame - FrameHeader.size)
            client.done = { loop.stop() }
            Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port) { result in
                guard case .success(let connection) = result else {
                    Issue.record("connect failed: \(result)")
                    loop.stop()
                    return
                }
                connection.handler = client
                client.start(connection)
            }
            runLoop(loop)
            #expect(client.failures.isEmpty, "\(client.failures.prefix(3))")
            #expect(client.received == 100)
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
            let bodies: [[UInt8]] = [[1, 2, 3, 4, 5], [], Array(100..<130)]
            for (index, body) in bodies.enumerated() {
                stream += makeFrame(correlation: UInt32(index + 1), body: body)
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
                writer = loop.schedule(after: .zero, repeating: true) {
                    guard offset < stream.count else { return }
                    connection.write([stream[offset]])
                    offset += 1
                }
            }
            runLoop(loop)
            writer?.cancel()
            #expect(frames.map(\.0) == [1, 2, 3])
            #expect(frames.map(\.1) == bodies)
        }
    }
}

extension EventLoopSuite {
    @Test func pausingInsideOnFrameHoldsBufferedFramesUntilResumed() throws {
        try withEventLoop { loop in
            // The server sends ten frames in one write, so they arrive in one read.
            var burst: [UInt8] = []
            for correlation in UInt32(0)..<10 { burst += makeFrame(correlation: correlation, body: [UInt8(correlation)]) }
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { $0.write(burst) }
            var seen: [UInt32] = []
            var deliveredWhilePaused = 0
            var paused = false
            Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port) { result in
                guard case .success(let connection) = result else { return }
                connection.callbacks.frame = { connection, header, _ in
                    if paused { deliveredWhilePaused += 1 }
                    seen.append(header.correlation)
                    if seen.count == 10 {
                        loop.stop()
                        return
                    }
                    // Pause after every frame; resume from a timer. The rest of the burst is
                    // already in the input buffer, so only the resume can deliver it.
                    connection.pauseReading()
                    paused = true
                    loop.schedule(after: .milliseconds(1)) {
                        paused = false
                        connection.resumeReading()
                    }
                }
            }
            runLoop(loop, timeout: .seconds(5))
            #expect(seen == Array(0..<10))
            #expect(deliveredWhilePaused == 0)
        }
    }
}
