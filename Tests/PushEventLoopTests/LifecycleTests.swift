import Glibc
import PushEventLoop
import PushWire
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

    @Test func closeIsIdempotentAndReportsOnce() throws {
        try withEventLoop { loop in
            var serverReasons: [CloseReason] = []
            var clientReasons: [CloseReason] = []
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { connection in
                connection.callbacks.close = { _, reason in
                    serverReasons.append(reason)
                    loop.stop()
                }
            }
            weak var weakClient: Connection?
            Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port) { result in
                guard case .success(let connection) = result else { return }
                weakClient = connection
                connection.callbacks.close = { closed, reason in
                    clientReasons.append(reason)
                    #expect(!closed.isOpen)
                    #expect(!closed.write([1]))
                    closed.close()  // re-entrant close is a no-op
                }
                connection.close()
                connection.close()
                #expect(connection.handler == nil)
                #expect(connection.outputBufferedBytes == 0)
            }
            runLoop(loop, timeout: .seconds(5))
            #expect(clientReasons == [.local])
            #expect(serverReasons == [.peerClosed])
            // Nothing but the C side kept the client alive, and close() gave that back.
            #expect(weakClient == nil)
        }
    }

    @Test func shutdownClosesEverythingStillOpen() throws {
        let baseline = Connection.liveInstances
        let loop = try EventLoop()
        var reasons: [CloseReason] = []
        var opened = 0
        let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { connection in
            opened += 1
            connection.callbacks.close = { _, reason in reasons.append(reason) }
            if opened == 6 { loop.stop() }
        }
        for _ in 0..<3 {
            Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port) { result in
                guard case .success(let connection) = result else { return }
                connection.callbacks.close = { _, reason in reasons.append(reason) }
                opened += 1
                if opened == 6 { loop.stop() }
            }
        }
        // A pending connect that shutdown must cancel.
        var pendingOutcome: ConnectError?
        let repeating = loop.schedule(after: .seconds(60), repeating: true) {}
        let signal = loop.onSignal(SIGUSR2) {}
        runLoop(loop, timeout: .seconds(5))
        Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port) { result in
            if case .failure(let error) = result { pendingOutcome = error }
        }
        #expect(loop.openConnectionCount == 7)
        loop.shutdown()
        #expect(reasons.count == 6)
        #expect(reasons.allSatisfy { $0 == .loopShutdown })
        #expect(pendingOutcome == .cancelled)
        #expect(!listener.isOpen)
        #expect(!repeating.isPending)
        #expect(!signal.isActive)
        #expect(loop.openConnectionCount == 0)
        // After shutdown everything is refused, nothing crashes.
        #expect(throws: EventLoopError.self) { _ = try Listener(loop: loop, host: "127.0.0.1", port: 0) { _ in } }
        #expect(Connection.connect(loop: loop, host: "127.0.0.1", port: 1) { _ in } == nil)
        #expect(!loop.schedule(after: .zero) {}.isPending)
        loop.shutdown()
        #expect(Connection.liveInstances == baseline)
    }
}
