#if canImport(Glibc)
import Glibc
#endif
import PushClock
import PushEventLoop
import PushSession
import PushWire

/// A plain blocking TCP client that speaks frames byte for byte: for tests, the
/// conformance suite and one-shot command-line calls, where exact control over every
/// byte matters more than throughput. Every wait is bounded by a timeout.
public final class BlockingWireClient {
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// The address is unusable or the name does not resolve: what went wrong, in words.
        case resolve(String)
        case connect(String, errno: Int32)
        case timedOut
        case closed
        case wire(WireError)
        case io(errno: Int32)

        public var description: String {
            switch self {
            case .resolve(let reason): reason
            case .connect(let address, let code): "cannot connect to \(address): \(String(cString: strerror(code)))"
            case .timedOut: "timed out waiting for the peer"
            case .closed: "the peer closed the connection"
            case .wire(let error): "protocol error: \(error)"
            case .io(let code): "socket error: \(String(cString: strerror(code)))"
            }
        }
    }

    private let fd: Int32
    private var decoder: FrameDecoder
    private var nextCorrelation: UInt32 = 1
    /// Frames received while waiting for another correlation id.
    private var stash: [Frame] = []
    public var defaultTimeoutMs: Int32 = 5_000

    /// - Parameter receiveBufferBytes: a small kernel receive buffer, set before connecting so
    ///   the advertised window stays small too (slow-consumer tests).
    /// - Parameter sendBufferBytes: a kernel send buffer large enough for every request a test
    ///   pipelines before it reads, which a server holding its reads does not take.
    public init(host: String, port: Int, timeoutMs: Int32 = 5_000, maxFrame: Int = FrameLimits.ceiling,
                receiveBufferBytes: Int32? = nil, sendBufferBytes: Int32? = nil) throws(Failure) {
        decoder = FrameDecoder(maxFrame: maxFrame)
        // A name is looked up (blocking, like everything here); its addresses are tried in order.
        let addresses: [SocketAddress]
        do {
            addresses = try SocketAddress.resolve(host: host, port: port)
        } catch {
            throw .resolve(error.description)
        }
        var lastFailure = Failure.resolve("cannot resolve '\(host)'")
        let options = BlockingConnect.Options(sendTimeoutMs: Int(timeoutMs), receiveBufferBytes: receiveBufferBytes,
                                              sendBufferBytes: sendBufferBytes, noDelay: true)
        for address in addresses {
            do {
                fd = try BlockingConnect.connect(to: address, options)
                return
            } catch where error.step == .connect {
                lastFailure = .connect("\(HostPort(host: host, port: port))", errno: error.code)
            } catch {
                throw .io(errno: error.code)
            }
        }
        throw lastFailure
    }

    deinit { Glibc.close(fd) }

    /// The next correlation id this client will use.
    public func takeCorrelation() -> UInt32 {
        defer { nextCorrelation &+= 1 }
        return nextCorrelation
    }

    public func sendRaw(_ bytes: [UInt8]) throws(Failure) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { throw errno == EAGAIN ? .timedOut : .io(errno: errno) }
            offset += sent
        }
    }

    @discardableResult
    public func send(_ message: Message, correlation: UInt32? = nil) throws(Failure) -> UInt32 {
        let id = correlation ?? takeCorrelation()
        try sendRaw(message.encoded(correlation: id))
        return id
    }

    /// The next frame from the peer, or a typed failure when none comes in time.
    public func receiveFrame(timeoutMs: Int32? = nil) throws(Failure) -> Frame {
        if !stash.isEmpty { return stash.removeFirst() }
        let deadline = Clocks.monotonicMilliseconds() + Int64(timeoutMs ?? defaultTimeoutMs)
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            do {
                if let frame = try decoder.next() { return frame }
            } catch {
                throw .wire(error)
            }
            let remaining = deadline - Clocks.monotonicMilliseconds()
            guard remaining > 0 else { throw .timedOut }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(min(remaining, Int64(Int32.max))))
            guard ready > 0 else {
                if ready < 0 && errno == EINTR { continue }
                throw .timedOut
            }
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count == 0 { throw .closed }
            guard count > 0 else { throw .io(errno: errno) }
            chunk.withUnsafeBytes { decoder.feed(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
        }
    }

    public func receive(timeoutMs: Int32? = nil) throws(Failure) -> (header: FrameHeader, message: Message) {
        let frame = try receiveFrame(timeoutMs: timeoutMs)
        do {
            return (frame.header, try Message.decode(frame))
        } catch {
            throw .wire(error)
        }
    }

    /// Sends a request and waits for the reply with its correlation id, keeping other
    /// frames for later `receive` calls.
    public func request(_ message: Message, timeoutMs: Int32? = nil) throws(Failure) -> Message {
        let id = try send(message)
        return try reply(to: id, timeoutMs: timeoutMs)
    }

    public func reply(to correlation: UInt32, timeoutMs: Int32? = nil) throws(Failure) -> Message {
        var skipped: [Frame] = []
        defer { stash.append(contentsOf: skipped) }
        while true {
            let frame = try receiveFrame(timeoutMs: timeoutMs)
            let isAnswer = frame.header.correlation == correlation && frame.header.type != .push && frame.header.type != .ping
            if isAnswer || frame.header.type == .goaway {
                do {
                    return try Message.decode(frame)
                } catch {
                    throw .wire(error)
                }
            }
            skipped.append(frame)
        }
    }

    /// HELLO, then HELLO_OK or the refusal that came instead.
    public func hello(_ hello: Hello) throws(Failure) -> Message {
        let message = try request(.hello(hello))
        if case .helloOK(let ok) = message { decoder.maxFrame = Int(ok.maxFrame) }
        return message
    }

    /// True if the peer closes (EOF or reset) within the timeout, draining what it sent first.
    public func waitForClose(timeoutMs: Int32 = 5_000) -> Bool {
        let deadline = Clocks.monotonicMilliseconds() + Int64(timeoutMs)
        var chunk = [UInt8](repeating: 0, count: 4096)
        while Clocks.monotonicMilliseconds() < deadline {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) >= 0 else { return false }
            if poller.revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
                let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if count <= 0 { return true }
            }
        }
        return false
    }

    /// Every byte until the peer closes, as text (a plain HTTP response, say).
    public func readAll(timeoutMs: Int32 = 5_000) -> String {
        var bytes: [UInt8] = []
        let deadline = Clocks.monotonicMilliseconds() + Int64(timeoutMs)
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while Clocks.monotonicMilliseconds() < deadline {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) >= 0 else { break }
            guard poller.revents != 0 else { continue }
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            bytes += chunk[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Half-closes the sending side.
    public func shutdownWrite() { Glibc.shutdown(fd, Int32(SHUT_WR)) }
}

