#if canImport(Glibc)
import Glibc
#endif
import PushClient
import PushClock
import PushEventLoop
import PushSession
import PushWire

/// A case connection over PushEventLoop, for TLS. The run's loop (one per run, on the
/// run's thread) turns only while a caller waits, so the channel behaves like a blocking
/// client: bytes written are flushed before `sendRaw` returns, and bytes read go through
/// a `FrameDecoder` exactly as `BlockingWireClient`'s do. It keeps the first bytes it
/// received for the probe.
final class LoopWireChannel: FrameChannel, ProbeConnection, ConnectionHandler {
    private let loop: EventLoop
    private var connection: Connection?
    private var decoder = FrameDecoder(maxFrame: FrameLimits.ceiling)
    private var closeReason: CloseReason?
    private let timeoutMs: Int32
    /// The first bytes the peer sent, kept for the probe's verdict.
    private(set) var firstBytes: [UInt8] = []
    private(set) var bytesReceived = 0
    static let keptBytes = 256

    private init(loop: EventLoop, timeoutMs: Int32) {
        self.loop = loop
        self.timeoutMs = timeoutMs
    }

    deinit {
        connection?.close()
    }

    /// Connects (and, with `tls`, completes the handshake and verifies the certificate)
    /// within `timeoutMs`.
    static func connect(_ endpoint: HostPort, tls: ConformanceTLS?, timeoutMs: Int32, loop: EventLoop) throws(ChannelOpenFailure) -> LoopWireChannel {
        let channel = LoopWireChannel(loop: loop, timeoutMs: timeoutMs)
        var outcome: Result<Connection, ConnectError>?
        let attempt = Connection.connect(loop: loop, host: endpoint.host, port: endpoint.port, tls: tls?.context,
                                         serverName: tls?.serverName) { result in
            // Reading starts when this returns: the handler must be in place by then.
            if case .success(let connection) = result {
                connection.isFramed = false
                connection.handler = channel
                channel.connection = connection
            }
            outcome = result
        }
        channel.drive(forMs: timeoutMs) { outcome != nil }
        switch outcome {
        case .success:
            return channel
        case .failure(let error):
            throw ChannelOpenFailure(description: "\(error)", refused: error == .refused)
        case nil:
            attempt?.close()
            throw ChannelOpenFailure(description: "no connection within \(timeoutMs) ms", refused: false)
        }
    }

    /// Runs the loop until `done()` or `milliseconds` have passed; a timer makes sure a
    /// blocking pass wakes up by the deadline.
    private func drive(forMs milliseconds: Int32, until done: () -> Bool) {
        guard !done() else { return }
        let deadline = Clocks.monotonicMilliseconds() + Int64(milliseconds)
        let timer = loop.schedule(after: .milliseconds(Int64(milliseconds))) {}
        defer { timer.cancel() }
        while !done(), Clocks.monotonicMilliseconds() < deadline {
            loop.runOnce(blocking: true)
        }
    }

    // MARK: FrameChannel

    func sendRaw(_ bytes: [UInt8]) throws(BlockingWireClient.Failure) {
        if case .error(let code) = closeReason { throw .io(errno: code) }
        // A peer that closed its side still "accepts" bytes, as the kernel's send
        // buffer would; the case finds out when it reads.
        guard let connection, connection.isOpen, closeReason == nil else { return }
        guard connection.write(bytes) else { return }
        drive(forMs: timeoutMs) { closeReason != nil || connection.outputBufferedBytes == 0 }
        if closeReason == nil, connection.outputBufferedBytes > 0 { throw .timedOut }
    }

    func receiveFrame(timeoutMs wait: Int32?) throws(BlockingWireClient.Failure) -> Frame {
        let deadline = Clocks.monotonicMilliseconds() + Int64(wait ?? timeoutMs)
        while true {
            do {
                if let frame = try decoder.next() { return frame }
            } catch {
                throw .wire(error)
            }
            if let closeReason { throw Self.failure(for: closeReason) }
            let remaining = deadline - Clocks.monotonicMilliseconds()
            guard remaining > 0 else { throw .timedOut }
            let seen = bytesReceived
            drive(forMs: Int32(clamping: remaining)) { bytesReceived != seen || closeReason != nil }
        }
    }

    /// Waits until at least `count` bytes came, the peer closed, or the time is up.
    func awaitBytes(_ count: Int, timeoutMs wait: Int32) {
        drive(forMs: wait) { bytesReceived >= count || closeReason != nil }
    }

    var peerClosed: Bool { closeReason != nil }

    func shutdownWrite() {
        connection?.close()
    }

    private static func failure(for reason: CloseReason) -> BlockingWireClient.Failure {
        switch reason {
        case .error(let code): .io(errno: code)
        case .tlsError: .io(errno: EPROTO)
        default: .closed
        }
    }

    // MARK: ConnectionHandler

    func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) {}

    func onBytes(_ connection: Connection, bytes: UnsafeRawBufferPointer) {
        if firstBytes.count < Self.keptBytes { firstBytes += bytes.prefix(Self.keptBytes - firstBytes.count) }
        bytesReceived += bytes.count
        decoder.feed(bytes)
    }

    func onBackpressure(_ connection: Connection) -> BackpressureAction { .keepOpen }

    func onClose(_ connection: Connection, reason: CloseReason) {
        closeReason = reason
        self.connection = nil
    }
}
