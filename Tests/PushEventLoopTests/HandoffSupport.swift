import Glibc
import PushEventLoop
import PushWire
import Synchronization
import PushTestSupport
import Testing

/// What the adopting loop saw, read by the test thread once the loops are done.
final class AdoptionLog: Sendable {
    struct Record {
        var correlations: [UInt32] = []
        var badBodies = 0
        var offLoopThread = 0
        var adoptFailures = 0
        var closeReasons: [CloseReason] = []
    }

    let record = Mutex(Record())
}

/// Echoes every frame from the adopting loop and logs it.
final class AdoptedEcho: ConnectionHandler {
    private let log: AdoptionLog
    private let maxBody: Int
    private var scratch: [UInt8] = []

    init(log: AdoptionLog, maxBody: Int) {
        self.log = log
        self.maxBody = maxBody
    }

    func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) {
        let intact = matchesPattern(body, header.correlation, maxLength: maxBody)
        let onLoop = connection.loop.isInLoopThread
        log.record.withLock {
            $0.correlations.append(header.correlation)
            if !intact { $0.badBodies += 1 }
            if !onLoop { $0.offLoopThread += 1 }
        }
        scratch.removeAll(keepingCapacity: true)
        header.write(into: &scratch)
        connection.write(scratch)
        connection.write(body)
    }

    func onClose(_ connection: Connection, reason: CloseReason) {
        log.record.withLock { $0.closeReasons.append(reason) }
    }
}

/// The accepting side: on the first frame, hands the connection off (that frame
/// prepended, so the new owner sees it too) and posts it to `target` for adoption.
final class HandingOffServer: ConnectionHandler {
    let target: LoopHandle
    let log: AdoptionLog
    let maxBody: Int
    private(set) var handedOff = false
    private(set) var framesAfterHandOff = 0
    private(set) var closeReasons: [CloseReason] = []
    private(set) var firstFrameSize = 0
    /// What the completion got: the handoff's byte count, or nil.
    private(set) var outcome: Int??
    private(set) var oldConnectionStillOpen = false
    private(set) var postRefused = false

    init(target: LoopHandle, log: AdoptionLog, maxBody: Int) {
        self.target = target
        self.log = log
        self.maxBody = maxBody
    }

    func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) {
        guard !handedOff else {
            framesAfterHandOff += 1
            return
        }
        handedOff = true
        var frame: [UInt8] = []
        header.write(into: &frame)
        frame += body
        firstFrameSize = frame.count
        prepare(connection)
        connection.handOff(prepending: frame) { [self] handoff in
            outcome = .some(handoff?.bufferedByteCount)
            oldConnectionStillOpen = connection.isOpen
            guard let handoff else { return }
            let log = self.log
            let maxBody = self.maxBody
            let posted = target.executeWithLoop { loop in
                let adopted = Connection.adopt(handoff, on: loop) { $0.handler = AdoptedEcho(log: log, maxBody: maxBody) }
                if adopted == nil { log.record.withLock { $0.adoptFailures += 1 } }
            }
            if !posted { postRefused = true }
        }
    }

    /// Runs on the first frame, just before `handOff` (for tests that queue output).
    var prepare: (Connection) -> Void = { _ in }

    func onClose(_ connection: Connection, reason: CloseReason) {
        closeReasons.append(reason)
    }
}

/// Sends its frames in batches, each batch in one write, the next once the previous has
/// come back, and checks every echo arrives whole and in order.
final class BatchClient: ConnectionHandler {
    private let batches: [Int]
    private let maxBody: Int
    private var batchIndex = 0
    private(set) var sent: UInt32 = 0
    private(set) var received: UInt32 = 0
    private(set) var failures: [String] = []
    private(set) var closeReason: CloseReason?
    var done: () -> Void = {}

    init(batches: [Int], maxBody: Int) {
        self.batches = batches
        self.maxBody = maxBody
    }

    var total: UInt32 { UInt32(batches.reduce(0, +)) }

    func sendBatch(_ connection: Connection) {
        var out: [UInt8] = []
        for _ in 0..<batches[batchIndex] {
            out += makeFrame(correlation: sent, body: patternBody(sent, maxLength: maxBody))
            sent += 1
        }
        batchIndex += 1
        connection.write(out)
    }

    func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) {
        if header.correlation != received || !matchesPattern(body, received, maxLength: maxBody) {
            failures.append("echo \(received): correlation \(header.correlation), \(body.count) body bytes")
            done()
            return
        }
        received += 1
        guard received == sent else { return }
        if batchIndex < batches.count {
            sendBatch(connection)
        } else {
            done()
        }
    }

    func onClose(_ connection: Connection, reason: CloseReason) {
        closeReason = reason
        if received < total { failures.append("closed (\(reason)) after \(received) echoes") }
        done()
    }
}

/// A self-signed certificate for 127.0.0.1 in a fresh temporary directory.
struct TemporaryCertificate {
    let directory: String
    var certificate: String { directory + "/cert.pem" }
    var key: String { directory + "/key.pem" }

    init() throws {
        var template = Array("/tmp/pushloop-handoff-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { $0.baseAddress.flatMap { mkdtemp($0) } }
        guard made != nil else { throw EventLoopError.system(operation: "mkdtemp", errno: errno) }
        directory = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        try SelfSignedCertificate.write(
            commonName: "localhost", subjectAltNames: ["DNS:localhost", "IP:127.0.0.1"],
            certificatePath: certificate, privateKeyPath: key)
    }

    func remove() {
        unlink(certificate)
        unlink(key)
        rmdir(directory)
    }
}

/// One blocking round trip from a plain socket: a frame out, its echo back. For client
/// threads; false on any failure or after `timeoutSeconds` without an answer.
func blockingEcho(port: Int, correlation: UInt32, timeoutSeconds: Int = 5) -> Bool {
    guard let fd = try? LoopbackSocket.connect(port: port, receiveTimeoutMs: timeoutSeconds * 1000) else { return false }
    defer { close(fd) }
    let frame = makeFrame(correlation: correlation, body: [1, 2, 3, 4, 5])
    guard frame.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == frame.count else {
        return false
    }
    var echo = [UInt8](repeating: 0, count: frame.count)
    var got = 0
    while got < echo.count {
        let count = echo.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + got, $0.count - got, 0) }
        guard count > 0 else { return false }
        got += count
    }
    return echo == frame
}
