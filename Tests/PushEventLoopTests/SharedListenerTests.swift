import Glibc
import PushEventLoop
import PushWire
import Synchronization
import Testing

/// Counts the connections a loop accepted and echoes their frames.
private final class CountingEcho: Sendable {
    let accepted = Atomic<Int>(0)
}

extension EventLoopSuite {
    /// Two loops accept from one listening socket; closing one loop's listener leaves
    /// the other accepting on the same port.
    @Test func aListenerSharedByTwoLoopsAcceptsOnBothAndOutlivesEitherOne() throws {
        let firstCount = CountingEcho()
        let secondCount = CountingEcho()
        let rounds = 200
        let afterClose = 50
        var port = 0
        var secondLoop: EventLoopThread?
        try withEventLoop { loop in
            let echo = EchoHandler()
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { connection in
                firstCount.accepted.add(1, ordering: .relaxed)
                connection.handler = echo
            }
            port = listener.port
            let listenPort = port
            let shared = try listener.sharedSockets()
            #expect(shared.port == port)
            let failedToShare = Atomic<Bool>(false)
            secondLoop = try EventLoopThread(name: "test-second") { loop in
                let echo = EchoHandler()
                do {
                    _ = try Listener(loop: loop, sharing: shared) { connection in
                        secondCount.accepted.add(1, ordering: .relaxed)
                        connection.handler = echo
                    }
                } catch {
                    failedToShare.store(true, ordering: .relaxed)
                }
            }
            let shareFailed = failedToShare.load(ordering: .relaxed)
            #expect(!shareFailed)

            // Phase 1: both loops accept.
            let failures = Atomic<Int>(0)
            let handle = loop.handle
            let clients = TestThread {
                for round in 0..<rounds where !blockingEcho(port: listenPort, correlation: UInt32(round)) {
                    failures.add(1, ordering: .relaxed)
                }
                handle.stop()
            }
            runLoop(loop, timeout: .seconds(60))
            clients.join()
            #expect(failures.load(ordering: .relaxed) == 0)
            let first = firstCount.accepted.load(ordering: .relaxed)
            let second = secondCount.accepted.load(ordering: .relaxed)
            #expect(first + second == rounds)
            #expect(first > 0 && second > 0, "accepted: \(first) on the first loop, \(second) on the second")

            // Phase 2: the first loop's listener closes (its socket is a dup, so the
            // second's stays open); every connection now lands on the second loop.
            listener.close()
            let lateClients = TestThread {
                for round in 0..<afterClose where !blockingEcho(port: listenPort, correlation: UInt32(round)) {
                    failures.add(1, ordering: .relaxed)
                }
                handle.stop()
            }
            runLoop(loop, timeout: .seconds(60))
            lateClients.join()
            #expect(failures.load(ordering: .relaxed) == 0)
            #expect(firstCount.accepted.load(ordering: .relaxed) == first)
            #expect(secondCount.accepted.load(ordering: .relaxed) == second + afterClose)
        }
        secondLoop?.shutdown()
        #expect(secondLoop?.handle.liveConnectionObjects == 0)
        // Both listeners gone: nothing listens on the port any more.
        #expect(!blockingEcho(port: port, correlation: 0, timeoutSeconds: 1))
    }
}
