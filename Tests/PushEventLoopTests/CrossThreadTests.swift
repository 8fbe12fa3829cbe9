import Glibc
import PushEventLoop
import PushWire
import Synchronization
import Testing

/// Loop-confined record of cross-thread work, reached from producers via LoopBound.
private final class Ledger {
    var next: [Int]
    var outOfOrder = 0
    var offLoopThread = 0
    var total = 0

    init(producers: Int) { next = Array(repeating: 0, count: producers) }
}

extension EventLoopSuite {
    @Test func executeFromManyThreadsRunsOnTheLoopInOrderPerProducer() throws {
        let producers = 4
        let perProducer = 20_000
        try withEventLoop { loop in
            let ledger = LoopBound(Ledger(producers: producers), loop: loop)
            let handle = loop.handle
            #expect(!handle.isInLoopThread || loop.isInLoopThread)
            let threads = (0..<producers).map { producer in
                TestThread {
                    for sequence in 0..<perProducer {
                        handle.executeWithLoop { loop in
                            let record = ledger.value
                            if !loop.isInLoopThread { record.offLoopThread += 1 }
                            if record.next[producer] != sequence { record.outOfOrder += 1 }
                            record.next[producer] = sequence + 1
                            record.total += 1
                            if record.total == producers * perProducer { loop.stop() }
                        }
                    }
                }
            }
            runLoop(loop, timeout: .seconds(20))
            for thread in threads { thread.join() }
            let record = ledger.value
            #expect(record.total == producers * perProducer)
            #expect(record.outOfOrder == 0)
            #expect(record.offLoopThread == 0)
        }
    }

    @Test func workPostedAfterShutdownIsRefused() throws {
        let loop = try EventLoop()
        let handle = loop.handle
        let ran = Atomic<Int>(0)
        #expect(handle.execute { ran.add(1, ordering: .relaxed) })
        loop.runOnce()
        #expect(ran.load(ordering: .relaxed) == 1)
        loop.shutdown()
        #expect(!handle.execute { ran.add(1, ordering: .relaxed) })
        #expect(ran.load(ordering: .relaxed) == 1)
    }

    @Test func loopThreadsServeEachOtherAndShutDownCleanly() throws {
        let port = Mutex(0)
        let server = try EventLoopThread(name: "test-server") { loop in
            let echo = EchoHandler()
            do {
                let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { $0.handler = echo }
                port.withLock { $0 = listener.port }
            } catch {
                Issue.record("listen failed: \(error)")
            }
        }
        let serverPort = port.withLock { $0 }
        #expect(serverPort > 0)
        #expect(!server.handle.isInLoopThread)

        try withEventLoop { loop in
            let client = PipelinedClient(total: 1_000, window: 32)
            var serverGone: CloseReason?
            client.done = {
                // All echoed: now take the server down under the client's feet.
                server.shutdown()
            }
            Connection.connect(loop: loop, host: "127.0.0.1", port: serverPort) { result in
                guard case .success(let connection) = result else {
                    Issue.record("connect failed: \(result)")
                    loop.stop()
                    return
                }
                connection.handler = client
                client.start(connection)
            }
            // PipelinedClient's onClose is taken; watch the close through a wrapper timer.
            let poll = loop.schedule(after: .milliseconds(5), repeating: true) {
                if let reason = client.closeReason {
                    serverGone = reason
                    loop.stop()
                }
            }
            runLoop(loop)
            poll.cancel()
            #expect(client.received == 1_000)
            // The server loop closed its connection on shutdown; the client saw EOF.
            #expect(serverGone == .peerClosed)
        }
        server.shutdown()  // idempotent
        #expect(!server.handle.execute {})
        #expect(server.handle.liveConnectionObjects == 0)
    }
}
