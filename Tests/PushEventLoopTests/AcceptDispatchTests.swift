import Glibc
import PushEventLoop
import Synchronization
import Testing

extension EventLoopSuite {
    /// A listener's `dispatch` places accepted sockets before anything is read: each one
    /// taken over by another listener is served there and never by the one that accepted
    /// it; a listener that has closed hangs up on a socket placed on it.
    @Test func dispatchPlacesAcceptedSocketsOnAnotherListener() throws {
        let acceptedHere = Atomic<Int>(0)
        let servedThere = Atomic<Int>(0)
        let rounds = 40
        try withEventLoop { loop in
            let echo = EchoHandler()
            let there = try Listener(loop: loop, host: "127.0.0.1", port: 0) { connection in
                servedThere.add(1, ordering: .relaxed)
                connection.handler = echo
            }
            let here = try Listener(loop: loop, host: "127.0.0.1", port: 0) { connection in
                acceptedHere.add(1, ordering: .relaxed)
                connection.handler = echo
            }
            here.dispatch = { fd in
                there.takeOver(fd)
                return true
            }
            let port = here.port
            let handle = loop.handle
            let failures = Atomic<Int>(0)
            let clients = TestThread {
                for round in 0..<rounds where !blockingEcho(port: port, correlation: UInt32(round)) {
                    failures.add(1, ordering: .relaxed)
                }
                handle.stop()
            }
            runLoop(loop, timeout: .seconds(60))
            clients.join()
            #expect(failures.load(ordering: .relaxed) == 0)
            #expect(acceptedHere.load(ordering: .relaxed) == 0)
            #expect(servedThere.load(ordering: .relaxed) == rounds)

            // The listener sockets are placed on has closed: they are closed, not leaked
            // and not served.
            there.close()
            let refused = Atomic<Int>(0)
            let lateClients = TestThread {
                for round in 0..<5 where !blockingEcho(port: port, correlation: UInt32(round)) {
                    refused.add(1, ordering: .relaxed)
                }
                handle.stop()
            }
            runLoop(loop, timeout: .seconds(60))
            lateClients.join()
            #expect(refused.load(ordering: .relaxed) == 5)
            #expect(servedThere.load(ordering: .relaxed) == rounds)
            here.close()
        }
    }
}
