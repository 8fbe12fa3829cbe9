import Glibc
@testable import PushEventLoop
import PushWire
import Synchronization
import PushTestSupport
import Testing

extension EventLoopSuite {
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
        try inIsolatedProcess {
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
            #expect(loop.handle.liveConnectionObjects == 0)
        }
    }
}

private final class ReasonLog: Sendable {
    let reasons = Mutex<[CloseReason]>([])
}

/// Echo that reports its close reason across threads.
private final class ReportingEcho: ConnectionHandler {
    let echo = EchoHandler()
    let log: ReasonLog

    init(log: ReasonLog) { self.log = log }

    func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) {
        echo.onFrame(connection, header: header, body: body)
    }

    func onClose(_ connection: Connection, reason: CloseReason) {
        log.reasons.withLock { $0.append(reason) }
    }
}

extension EventLoopSuite {
    @Test func peerThatHalfClosesStillGetsItsReplies() throws {
        let log = ReasonLog()
        let port = Mutex(0)
        let server = try EventLoopThread(name: "half-close") { loop in
            let listener = try? Listener(loop: loop, host: "127.0.0.1", port: 0) { connection in
                connection.handler = ReportingEcho(log: log)
            }
            port.withLock { $0 = listener?.port ?? 0 }
        }
        defer { server.shutdown() }

        // A plain blocking socket: send three frames, shut down the sending side, read to EOF.
        let address = try SocketAddress(host: "127.0.0.1", port: port.withLock { $0 })
        let fd = try LoopbackSocket.connect(port: address.port, receiveTimeoutMs: 5_000)
        defer { close(fd) }
        var request: [UInt8] = []
        for correlation in UInt32(1)...3 { request += makeFrame(correlation: correlation, body: patternBody(correlation)) }
        #expect(write(fd, request, request.count) == request.count)
        shutdown(fd, Int32(SHUT_WR))
        var reply: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count <= 0 { break }
            reply += buffer[0..<count]
        }
        #expect(reply == request)
        // The server closed only after flushing, and says the peer closed.
        waitUntil { !log.reasons.withLock { $0.isEmpty } }
        #expect(log.reasons.withLock { $0 } == [.peerClosed])
    }

    @Test func closeAfterFlushGivesUpOnAPeerThatNeverReads() throws {
        try withEventLoop { loop in
            var reason: CloseReason?
            var queuedAtClose = 0
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { connection in
                connection.maxOutputBytes = 64 * 1024 * 1024
                connection.callbacks.close = { _, closeReason in
                    reason = closeReason
                    loop.stop()
                }
                // Far more than the kernel buffers hold for a peer that is not reading.
                let block = [UInt8](repeating: 0x5A, count: 1024 * 1024)
                for _ in 0..<16 { connection.write(block) }
                queuedAtClose = connection.outputBufferedBytes
                connection.closeAfterFlush(reason: .local, timeout: .milliseconds(200))
                #expect(!connection.write([1]), "writes are refused once closing")
            }
            var client: Connection?
            Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port) { result in
                guard case .success(let connection) = result else { return }
                connection.pauseReading()
                client = connection
            }
            runLoop(loop)
            #expect(queuedAtClose == 16 * 1024 * 1024)
            #expect(reason == .flushTimeout)
            client?.close()
        }
    }
}

extension EventLoopSuite {
    @Test func listenerRefusesPromptlyWhenOutOfFileDescriptorsAndRecovers() throws {
        try inIsolatedProcess {
            var saved = rlimit()
            getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &saved)
            defer {
                var restore = saved
                setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &restore)
            }
            try withEventLoop { loop in
                var refused: [[Int]] = []
                var accepted = 0
                let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { connection in
                    accepted += 1
                    connection.close()
                    loop.stop()
                }
                listener.onRefused = { code, count in refused.append([Int(code), count]) }
                // Fill the descriptor table (under a lowered limit) up to one free slot: the
                // client's socket takes it, so the server's accept() fails with EMFILE.
                var limited = saved
                limited.rlim_cur = 512
                setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limited)
                var fillers: [Int32] = []
                while true {
                    let fd = open("/dev/null", O_RDONLY)
                    if fd < 0 { break }
                    fillers.append(fd)
                }
                if let last = fillers.popLast() { close(last) }
                var client: Connection?
                var clientClosed = false
                Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port) { result in
                    guard case .success(let connection) = result else { return }
                    client = connection
                    connection.callbacks.close = { _, _ in
                        clientClosed = true
                        loop.stop()
                    }
                }
                // The listener's spare descriptor takes the connection only to close it: the
                // client is told at once instead of waiting in the backlog.
                runLoop(loop, timeout: .seconds(5))
                #expect(clientClosed, "the client was not refused")
                #expect(refused == [[Int(EMFILE), 1]])
                #expect(accepted == 0)
                #expect(listener.reserveFD >= 0, "the spare descriptor is held again")
                for fd in fillers { close(fd) }
                fillers.removeAll()
                // Descriptors are back: the next client is accepted.
                Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port) { result in
                    if case .success(let connection) = result { client = connection }
                }
                runLoop(loop, timeout: .seconds(5))
                #expect(accepted == 1)
                client?.close()
                listener.close()
            }
        }
    }
}
