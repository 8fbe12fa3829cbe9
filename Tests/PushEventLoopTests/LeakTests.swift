import Glibc
import PushEventLoop
import PushWire
import PushTestSupport
import Testing

/// Client side of the churn test: one frame out, close on its echo. Shared by every
/// client connection, so the test itself allocates nothing per connection.
private final class OneShotClient: ConnectionHandler {
    var closed = 0
    var failures = 0
    var batchDone: () -> Void = {}
    var outstanding = 0

    func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) {
        connection.close()
    }

    func onClose(_ connection: Connection, reason: CloseReason) {
        if reason != .local { failures += 1 }
        finishOne()
    }

    func finishOne() {
        closed += 1
        outstanding -= 1
        if outstanding == 0 { batchDone() }
    }
}

extension EventLoopSuite {
    @Test func openingAndClosingTenThousandConnectionsLeaksNothing() throws {
        try inIsolatedProcess {
            let total = 10_000
            let batch = 100
            var rssAfterWarmup = 0
            var rssAtEnd = 0
            try withEventLoop { loop in
                let echo = EchoHandler()
                let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { $0.handler = echo }
                let client = OneShotClient()
                var started = 0
                let frame = makeFrame(correlation: 1, body: [1, 2, 3, 4])

                func startBatch() {
                    client.outstanding = batch
                    for _ in 0..<batch {
                        started += 1
                        Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port) { result in
                            switch result {
                            case .success(let connection):
                                connection.handler = client
                                connection.write(frame)
                            case .failure:
                                client.failures += 1
                                client.finishOne()
                            }
                        }
                    }
                }

                /// Waits (on the loop) until the server side has closed everything too.
                func whenServerSettles(_ then: @escaping () -> Void) {
                    if loop.openConnectionCount == 0 {
                        then()
                    } else {
                        loop.schedule(after: .milliseconds(1)) { whenServerSettles(then) }
                    }
                }

                client.batchDone = {
                    whenServerSettles {
                        if started == 2_000 { rssAfterWarmup = residentBytes() }
                        if started < total {
                            startBatch()
                        } else {
                            rssAtEnd = residentBytes()
                            loop.stop()
                        }
                    }
                }
                startBatch()
                runLoop(loop, timeout: .seconds(40))
                #expect(client.closed == total)
                #expect(client.failures == 0)
                #expect(echo.framesEchoed == total)
                #expect(echo.closeReasons.count == total)
                #expect(echo.closeReasons.allSatisfy { $0 == .peerClosed })
                #expect(loop.openConnectionCount == 0)
            }
            let growth = rssAtEnd - rssAfterWarmup
            #expect(rssAfterWarmup > 0)
            #expect(growth < 8 * 1024 * 1024, "RSS grew by \(growth / 1024) KiB between 2,000 and 10,000 connections")
        }
    }

    @Test func idleConnectionsCostLittleMemory() throws {
        try inIsolatedProcess {
            let pairs = 1_500
            var perConnection = 0
            try withEventLoop { loop in
                var accepted = 0
                var serverSide: [Connection] = []
                var clientSide: [Connection] = []
                serverSide.reserveCapacity(pairs)
                clientSide.reserveCapacity(pairs)
                let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { connection in
                    accepted += 1
                    serverSide.append(connection)
                }
                // Warm up allocator and loop structures so they are not charged to the sample.
                var warm: Connection?
                Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port) { result in
                    if case .success(let connection) = result { warm = connection }
                }
                while warm == nil || accepted < 1 { loop.runOnce(blocking: true) }
                let before = residentBytes()
                for index in 0..<pairs {
                    Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port) { result in
                        if case .success(let connection) = result { clientSide.append(connection) }
                    }
                    if index % 250 == 249 { loop.runOnce() }
                }
                var spins = 0
                while (accepted < pairs + 1 || clientSide.count < pairs), spins < 100_000 {
                    loop.runOnce(blocking: true)
                    spins += 1
                }
                perConnection = (residentBytes() - before) / (2 * pairs)
                #expect(clientSide.count == pairs)
                for connection in clientSide + serverSide { connection.close() }
                warm?.close()
            }
            // libevent's bufferevent alone is about 1 KiB; the goal is 2 KiB per idle connection.
            #expect(perConnection < 2048, "\(perConnection) bytes of RSS per idle connection")
        }
    }
}
