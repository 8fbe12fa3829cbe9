import Glibc
import PushEventLoop
import PushWire
import Synchronization
import Testing

/// Echoes each frame with one write from a reused buffer, encoding the header by hand
/// so the measurement is of the event loop rather than of an encoder.
private final class LeanEcho: ConnectionHandler {
    private let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 8)

    deinit { scratch.deallocate() }

    func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) {
        scratch[0] = FrameHeader.magic
        scratch[1] = FrameHeader.version
        scratch[2] = header.rawType
        scratch[3] = header.flags
        scratch.storeBytes(of: header.correlation.bigEndian, toByteOffset: 4, as: UInt32.self)
        scratch.storeBytes(of: header.status.rawValue.bigEndian, toByteOffset: 8, as: UInt16.self)
        scratch.storeBytes(of: 0, toByteOffset: 10, as: UInt16.self)
        scratch.storeBytes(of: header.bodyLength.bigEndian, toByteOffset: 12, as: UInt32.self)
        UnsafeMutableRawBufferPointer(rebasing: scratch[16 ..< 16 + body.count]).copyMemory(from: body)
        connection.write(UnsafeRawBufferPointer(rebasing: scratch[0 ..< 16 + body.count]))
    }
}

/// Keeps `window` frames in flight and counts round trips.
private final class LeanPinger: ConnectionHandler {
    let frame = makeFrame(correlation: 1, body: [UInt8](repeating: 7, count: 16))
    var received = 0

    func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) {
        received += 1
        connection.write(frame)
    }
}

extension EventLoopSuite {
    /// Not part of the regular suite: `PUSHLOOP_BENCH=1 swift test -c release --filter echoThroughput`.
    /// Measures both layouts: client and server on one loop, and on two loop threads.
    @Test(.enabled(if: getenv("PUSHLOOP_BENCH") != nil))
    func echoThroughput() throws {
        try withEventLoop { loop in
            let echo = LeanEcho()
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { $0.handler = echo }
            let rate = measureEcho(loop: loop, port: listener.port)
            print("echo throughput, one loop: \(rate) frames/s (32-byte frames, 64 in flight)")
        }
        let port = Mutex(0)
        let server = try EventLoopThread(name: "bench-server") { loop in
            let echo = LeanEcho()
            let listener = try? Listener(loop: loop, host: "127.0.0.1", port: 0) { $0.handler = echo }
            port.withLock { $0 = listener?.port ?? 0 }
        }
        try withEventLoop { loop in
            let rate = measureEcho(loop: loop, port: port.withLock { $0 })
            print("echo throughput, two loop threads: \(rate) frames/s (32-byte frames, 64 in flight)")
            // Its side of the connection lives on the server thread: close it before counting.
            server.shutdown()
        }
    }

    private func measureEcho(loop: EventLoop, port: Int) -> Int {
        let pinger = LeanPinger()
        var connection: Connection?
        Connection.connect(loop: loop, host: "127.0.0.1", port: port) { result in
            guard case .success(let open) = result else { return }
            connection = open
            open.handler = pinger
            for _ in 0..<64 { open.write(pinger.frame) }
        }
        var startCount = 0
        var start = ContinuousClock.now
        loop.schedule(after: .milliseconds(500)) {
            startCount = pinger.received
            start = .now
        }
        loop.schedule(after: .milliseconds(3500)) { loop.stop() }
        runLoop(loop)
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        connection?.close()
        return Int(Double(pinger.received - startCount) / seconds)
    }
}
