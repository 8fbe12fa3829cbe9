#if canImport(Glibc)
import Glibc
#endif
import Histogram
import PushClock
import PushEventLoop
import PushSession
import PushWire
import Synchronization

/// Framed echo over loopback through PushEventLoop: a server loop thread echoes every
/// frame; a client on the calling thread keeps `inflight` frames outstanding.
public struct EchoBenchmark {
    public var inflight: Int
    public var payloadSize: Int
    public var warmupSeconds: Double
    public var durationSeconds: Double

    public init(inflight: Int, payloadSize: Int, warmupSeconds: Double, durationSeconds: Double) {
        self.inflight = inflight
        self.payloadSize = payloadSize
        self.warmupSeconds = warmupSeconds
        self.durationSeconds = durationSeconds
    }

    public func run() throws -> BenchReport {
        let startedAt = Timestamp.now()
        let port = Mutex(0)
        let server = try EventLoopThread(name: "echo-server") { loop in
            let echo = EchoServer()
            let listener = try? Listener(loop: loop, host: "127.0.0.1", port: 0) { $0.handler = echo }
            port.withLock { $0 = listener?.port ?? 0 }
        }
        defer { server.shutdown() }
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let client = EchoClient(inflight: inflight, payloadSize: payloadSize)
        var failure: ConnectError?
        Connection.connect(loop: loop, host: "127.0.0.1", port: port.withLock { $0 }) { result in
            switch result {
            case .success(let connection):
                connection.handler = client
                client.start(connection)
            case .failure(let error):
                failure = error
                loop.stop()
            }
        }
        _ = loop.schedule(after: .milliseconds(Int64(warmupSeconds * 1000))) { client.beginMeasuring() }
        _ = loop.schedule(after: .milliseconds(Int64((warmupSeconds + durationSeconds) * 1000))) {
            client.endMeasuring()
            loop.stop()
        }
        loop.run()
        if let failure { throw failure }
        client.connection?.close()
        return BenchReport(scenario: "echo", parameters: [("inflight", .integer(inflight)), ("payload_size", .integer(payloadSize)),
                                                          ("duration_s", .number(durationSeconds)), ("warmup_s", .number(warmupSeconds))],
                           operations: client.measured, seconds: client.measuredSeconds, latency: client.histogram, startedAt: startedAt)
    }
}

/// Writes each frame back with one write from a reused buffer.
private final class EchoServer: ConnectionHandler {
    private var scratch: [UInt8] = []

    func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) {
        scratch.removeAll(keepingCapacity: true)
        header.write(into: &scratch)
        scratch.append(contentsOf: body)
        connection.write(scratch)
    }
}

private final class EchoClient: ConnectionHandler {
    let inflight: Int
    var frame: [UInt8]
    var sentAt: [UInt64]
    var nextCorrelation: UInt32 = 0
    var histogram = makeLatencyHistogram()
    var measuring = false
    var measured: UInt64 = 0
    var startNanos: UInt64 = 0
    var measuredSeconds = 0.0
    var connection: Connection?

    init(inflight: Int, payloadSize: Int) {
        self.inflight = inflight
        self.sentAt = Array(repeating: 0, count: inflight)
        var frame: [UInt8] = []
        FrameHeader(type: .ping, correlation: 0, bodyLength: UInt32(payloadSize)).write(into: &frame)
        frame += Array(repeating: 0x5A, count: payloadSize)
        self.frame = frame
    }

    func start(_ connection: Connection) {
        self.connection = connection
        for _ in 0..<inflight { send(connection) }
    }

    private func send(_ connection: Connection) {
        let correlation = nextCorrelation
        nextCorrelation &+= 1
        frame[4] = UInt8(truncatingIfNeeded: correlation >> 24)
        frame[5] = UInt8(truncatingIfNeeded: correlation >> 16)
        frame[6] = UInt8(truncatingIfNeeded: correlation >> 8)
        frame[7] = UInt8(truncatingIfNeeded: correlation)
        sentAt[Int(correlation % UInt32(inflight))] = Clocks.monotonicNanoseconds()
        connection.write(frame)
    }

    func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) {
        if measuring {
            let elapsed = Clocks.monotonicNanoseconds() &- sentAt[Int(header.correlation % UInt32(inflight))]
            _ = histogram.record(max(1, elapsed / 1000))
            measured += 1
        }
        send(connection)
    }

    func beginMeasuring() {
        measuring = true
        startNanos = Clocks.monotonicNanoseconds()
    }

    func endMeasuring() {
        measuring = false
        measuredSeconds = Double(Clocks.monotonicNanoseconds() - startNanos) / 1e9
    }
}

