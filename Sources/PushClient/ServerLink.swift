import PushEventLoop
import PushWire

/// One client connection to a securepush server that stays up: it says HELLO, matches
/// pipelined replies to requests by correlation id, answers and sends keepalive PINGs,
/// and reconnects with exponential backoff and jitter. Loop-confined.
public final class ServerLink: ConnectionHandler {
    public struct Endpoint: Sendable, CustomStringConvertible {
        public var host: String
        public var port: Int
        public var tls: TLSContext?
        public var serverName: String?

        public init(host: String, port: Int, tls: TLSContext? = nil, serverName: String? = nil) {
            self.host = host
            self.port = port
            self.tls = tls
            self.serverName = serverName
        }

        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    public let loop: EventLoop
    public let endpoint: Endpoint
    /// Made afresh for each connection (a provider credential carries a timestamp).
    private let makeHello: () -> Hello
    /// After each HELLO_OK.
    public var onReady: (() -> Void)?
    /// Frames the server starts (PUSH, MISSED, GOAWAY): the message and its correlation id.
    public var onServerMessage: ((Message, UInt32) -> Void)?
    /// The connection is down (it will retry unless the failure was a refused handshake).
    public var onDown: ((ClientError) -> Void)?
    /// Stop retrying once the server refuses the handshake (a bad credential will not get better).
    public var giveUpWhenRefused = true

    private var connection: Connection?
    private var ready = false
    private var stopped = false
    private var nextCorrelation: UInt32 = 1
    private var pending: [UInt32: (Result<Message, ClientError>) -> Void] = [:]
    private var queued: [(Message, (Result<Message, ClientError>) -> Void)] = []
    private var helloCorrelation: UInt32 = 0
    private var backoffMs: Int64 = 0
    private var keepaliveMs: Int64 = 30_000
    private var lastWriteMs: Int64 = 0
    private var timer: LoopTimer?
    private var scratch: [UInt8] = []
    /// Requests allowed in flight by the server ([5.3-1]).
    private var maxInflight = 1
    public static let maxQueuedRequests = 100_000

    public init(loop: EventLoop, endpoint: Endpoint, hello: @escaping () -> Hello) {
        self.loop = loop
        self.endpoint = endpoint
        self.makeHello = hello
    }

    public var isReady: Bool { ready }

    public func start() {
        guard connection == nil, !stopped else { return }
        connect()
        timer = loop.schedule(after: .milliseconds(250), repeating: true) { [weak self] in self?.tick() }
    }

    /// Closes for good; outstanding requests fail with `.stopped`.
    public func stop() {
        stopped = true
        timer?.cancel()
        timer = nil
        onDown = nil
        let closing = connection
        connection = nil
        ready = false
        closing?.close()
        failAll(.stopped)
    }

    /// Sends a request now or once connected; `completion` runs on the loop with the
    /// reply, an ERROR as `.status`, or the failure.
    public func request(_ message: Message, completion: @escaping (Result<Message, ClientError>) -> Void) {
        guard !stopped else { return completion(.failure(.stopped)) }
        if ready, pending.count < maxInflight, let connection {
            send(message, on: connection, completion: completion)
        } else if queued.count < ServerLink.maxQueuedRequests {
            queued.append((message, completion))
        } else {
            completion(.failure(.disconnected))
        }
    }

    /// A one-way message or a reply to the server's request (DELIVERY_ACK, PONG).
    @discardableResult
    public func reply(_ message: Message, correlation: UInt32) -> Bool {
        guard ready, let connection else { return false }
        return write(message, correlation: correlation, on: connection)
    }

    // MARK: connection lifecycle

    private func connect() {
        Connection.connect(loop: loop, host: endpoint.host, port: endpoint.port, tls: endpoint.tls,
                           serverName: endpoint.serverName) { [weak self] result in
            guard let self, !self.stopped else {
                if case .success(let connection) = result { connection.close() }
                return
            }
            switch result {
            case .success(let connection):
                self.connection = connection
                connection.handler = self
                self.helloCorrelation = self.takeCorrelation()
                _ = self.write(.hello(self.makeHello()), correlation: self.helloCorrelation, on: connection)
            case .failure(let error):
                self.down(.connect(error))
            }
        }
    }

    private func down(_ error: ClientError) {
        let wasConnected = connection != nil
        connection = nil
        ready = false
        failPending(.disconnected)
        onDown?(error)
        if case .refused = error, giveUpWhenRefused {
            stopped = true
            failAll(error)
            return
        }
        guard !stopped else { return }
        // Exponential backoff with jitter, so a fleet of devices does not reconnect in step.
        backoffMs = wasConnected ? 100 : min(max(backoffMs * 2, 100), 5_000)
        let delay = backoffMs / 2 + Int64.random(in: 0...backoffMs)
        loop.schedule(after: .milliseconds(delay)) { [weak self] in
            guard let self, !self.stopped, self.connection == nil else { return }
            self.connect()
        }
    }

    private func tick() {
        guard let connection, ready, keepaliveMs > 0 else { return }
        let now = EventLoop.monotonicMilliseconds()
        if now - connection.lastReadMillis > keepaliveMs * 3 / 2 {
            connection.close(reason: .local)
        } else if now - lastWriteMs > keepaliveMs {
            request(.ping) { _ in }
        }
    }

    // MARK: frames

    public func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) {
        let message: Message
        do {
            message = try Message.decode(header: header, body: body)
        } catch {
            // A server request we cannot read is refused; a broken reply fails its request.
            if let type = header.type, type.isRequest {
                _ = write(.error(ErrorReply(status: error.status, message: error.description)), correlation: header.correlation, on: connection)
            } else if let completion = pending.removeValue(forKey: header.correlation) {
                completion(.failure(.status(error.status, error.description)))
            }
            return
        }
        if !ready {
            handshakeReply(message, correlation: header.correlation, connection: connection)
            return
        }
        switch message {
        case .ping:
            _ = write(.pong, correlation: header.correlation, on: connection)
        case .push, .missed:
            onServerMessage?(message, header.correlation)
        case .goaway(let goaway):
            onServerMessage?(message, header.correlation)
            // Requests above last_correlation were not carried out ([5.5-2]): fail them now.
            for (correlation, completion) in pending where correlation > goaway.lastCorrelation {
                pending[correlation] = nil
                completion(.failure(.disconnected))
            }
        case .error(let error):
            pending.removeValue(forKey: header.correlation)?(.failure(.status(error.status, error.message)))
        default:
            // Replies are matched by correlation id alone; unknown ones are dropped ([5.3-5]).
            pending.removeValue(forKey: header.correlation)?(.success(message))
        }
        flushQueued()
    }

    private func handshakeReply(_ message: Message, correlation: UInt32, connection: Connection) {
        switch message {
        case .helloOK(let accepted) where correlation == helloCorrelation:
            ready = true
            backoffMs = 0
            keepaliveMs = Int64(accepted.keepaliveMs)
            maxInflight = Int(max(1, accepted.maxInflight))
            connection.maxFrame = Int(accepted.maxFrame)
            onReady?()
            flushQueued()
        case .error(let error):
            self.connection = nil
            connection.close()
            down(.refused(error.status, error.message))
        case .goaway(let goaway):
            self.connection = nil
            connection.close()
            down(goaway.status.isFatal && goaway.status != .unsupportedVersion ? .disconnected : .refused(goaway.status, goaway.message))
        default:
            break
        }
    }

    public func onFramingError(_ connection: Connection, error: WireError) {
        connection.close(reason: .framingError(error))
    }

    public func onClose(_ connection: Connection, reason: CloseReason) {
        guard self.connection === connection else { return }
        down(.disconnected)
    }

    // MARK: writing

    private func flushQueued() {
        guard ready, let connection else { return }
        var index = 0
        while index < queued.count, pending.count < maxInflight {
            send(queued[index].0, on: connection, completion: queued[index].1)
            index += 1
        }
        if index > 0 { queued.removeFirst(index) }
    }

    private func send(_ message: Message, on connection: Connection, completion: @escaping (Result<Message, ClientError>) -> Void) {
        let correlation = takeCorrelation()
        pending[correlation] = completion
        if !write(message, correlation: correlation, on: connection) {
            pending[correlation] = nil
            completion(.failure(.disconnected))
        }
    }

    private func write(_ message: Message, correlation: UInt32, on connection: Connection) -> Bool {
        scratch.removeAll(keepingCapacity: true)
        message.encode(correlation: correlation, into: &scratch)
        lastWriteMs = EventLoop.monotonicMilliseconds()
        return connection.write(scratch)
    }

    private func takeCorrelation() -> UInt32 {
        defer { nextCorrelation = nextCorrelation == UInt32.max ? 1 : nextCorrelation + 1 }
        return nextCorrelation
    }

    private func failPending(_ error: ClientError) {
        let failed = pending
        pending = [:]
        for completion in failed.values { completion(.failure(error)) }
    }

    private func failAll(_ error: ClientError) {
        failPending(error)
        let failed = queued
        queued = []
        for (_, completion) in failed { completion(.failure(error)) }
    }
}
