import Glibc
import PushEventLoop
import PushWire
import Testing

/// All event-loop tests run one at a time. Those that change or measure process-wide state
/// (RSS, the descriptor limit, signal dispositions) run in a child process of their own
/// (`inIsolatedProcess`), since the other test targets run beside this one.
@Suite(.serialized)
struct EventLoopSuite {}

/// Creates a loop on the test's thread, lets `body` set it up and run it, then shuts it
/// down and checks that every Connection object created meanwhile was freed.
func withEventLoop(_ body: (EventLoop) throws -> Void) throws {
    let loop = try EventLoop()
    try body(loop)
    loop.shutdown()
    // Per loop: suites in other test targets run connections of their own meanwhile.
    #expect(loop.handle.liveConnectionObjects == 0, "Connection objects leaked")
}

/// Runs `loop` until something calls `loop.stop()`; records a test failure and returns
/// false if `timeout` passes first.
@discardableResult
func runLoop(_ loop: EventLoop, timeout: Duration = .seconds(10), sourceLocation: SourceLocation = #_sourceLocation)
    -> Bool
{
    var timedOut = false
    let watchdog = loop.schedule(after: timeout) {
        timedOut = true
        loop.stop()
    }
    loop.run()
    watchdog.cancel()
    #expect(!timedOut, "event loop timed out", sourceLocation: sourceLocation)
    return !timedOut
}

/// A frame with an arbitrary message type: the event loop frames but does not interpret.
func makeFrame(correlation: UInt32, body: [UInt8] = [], type: UInt8 = 0x42) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(FrameHeader.size + body.count)
    FrameHeader(rawType: type, correlation: correlation, status: .ok, bodyLength: UInt32(body.count)).write(into: &out)
    out += body
    return out
}

/// The body pattern the echo tests send and check: length and bytes derived from the
/// correlation id (lengths scattered over 0...maxLength).
func patternBody(_ correlation: UInt32, maxLength: Int = 200) -> [UInt8] {
    let length = patternLength(correlation, maxLength: maxLength)
    return (0..<length).map { UInt8(truncatingIfNeeded: Int(correlation) &+ $0) }
}

private func patternLength(_ correlation: UInt32, maxLength: Int) -> Int {
    Int((UInt64(correlation) &* 7919) % UInt64(maxLength + 1))
}

func matchesPattern(_ body: UnsafeRawBufferPointer, _ correlation: UInt32, maxLength: Int = 200) -> Bool {
    let length = patternLength(correlation, maxLength: maxLength)
    guard body.count == length else { return false }
    for index in 0..<length where body[index] != UInt8(truncatingIfNeeded: Int(correlation) &+ index) {
        return false
    }
    return true
}

/// Writes every frame straight back. Stateless apart from a reused scratch buffer, so
/// one instance can serve every connection of a listener.
final class EchoHandler: ConnectionHandler {
    private var scratch: [UInt8] = []
    var framesEchoed = 0
    var closeReasons: [CloseReason] = []

    func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) {
        scratch.removeAll(keepingCapacity: true)
        header.write(into: &scratch)
        connection.write(scratch)
        connection.write(body)
        framesEchoed += 1
    }

    func onClose(_ connection: Connection, reason: CloseReason) {
        closeReasons.append(reason)
    }
}

/// Sends `total` frames keeping `window` in flight and checks they come back whole and
/// in order; calls `done` when all are back (or on the first failure).
final class PipelinedClient: ConnectionHandler {
    let total: Int
    let window: Int
    let maxBody: Int
    private(set) var sent = 0
    private(set) var received = 0
    private(set) var failures: [String] = []
    private(set) var closeReason: CloseReason?
    var done: () -> Void = {}

    init(total: Int, window: Int, maxBody: Int = 200) {
        self.total = total
        self.window = window
        self.maxBody = maxBody
    }

    var succeeded: Bool { failures.isEmpty && received == total }

    func start(_ connection: Connection) {
        while sent < min(window, total) { sendNext(connection) }
    }

    private func sendNext(_ connection: Connection) {
        let correlation = UInt32(sent)
        connection.write(makeFrame(correlation: correlation, body: patternBody(correlation, maxLength: maxBody)))
        sent += 1
    }

    func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) {
        let expected = UInt32(received)
        if header.correlation != expected || !matchesPattern(body, expected, maxLength: maxBody) {
            failures.append("frame \(received): correlation \(header.correlation), \(body.count) body bytes")
            done()
            return
        }
        received += 1
        if sent < total { sendNext(connection) }
        if received == total { done() }
    }

    func onClose(_ connection: Connection, reason: CloseReason) {
        closeReason = reason
        if received < total {
            failures.append("closed early (\(reason)) after \(received) frames")
            done()
        }
    }
}

/// Resident set size of this process, from /proc/self/statm.
func residentBytes() -> Int {
    guard let file = fopen("/proc/self/statm", "r") else { return 0 }
    defer { fclose(file) }
    var size = 0
    var resident = 0
    guard fscanf_statm(file, &size, &resident) else { return 0 }
    return resident * Int(sysconf(Int32(_SC_PAGESIZE)))
}

private func fscanf_statm(_ file: UnsafeMutablePointer<FILE>, _ size: inout Int, _ resident: inout Int) -> Bool {
    var buffer = [CChar](repeating: 0, count: 256)
    guard fgets(&buffer, Int32(buffer.count), file) != nil else { return false }
    let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    let fields = text.split(separator: " ")
    guard fields.count >= 2, let total = Int(fields[0]), let rss = Int(fields[1]) else { return false }
    size = total
    resident = rss
    return true
}

/// A plain pthread for producer threads in tests.
final class TestThread: @unchecked Sendable {
    // @unchecked: `thread` is written once in init, before any other thread sees self.
    private var thread = pthread_t()

    init(_ body: @escaping @Sendable () -> Void) {
        final class Box {
            let body: @Sendable () -> Void
            init(_ body: @escaping @Sendable () -> Void) { self.body = body }
        }
        let argument = Unmanaged.passRetained(Box(body)).toOpaque()
        let created = pthread_create(&thread, nil, { argument in
            guard let argument else { return nil }
            Unmanaged<Box>.fromOpaque(argument).takeRetainedValue().body()
            return nil
        }, argument)
        precondition(created == 0, "pthread_create failed")
    }

    func join() { pthread_join(thread, nil) }
}
