import PushClock
import PushEventLoop
import PushSession
import PushWire

/// One client connection to a securepush server that stays up: a thin driver of a
/// client `PeerSession` (HELLO, keepalive, GOAWAY, deadlines) and a `RequestWindow`
/// (pipelined requests matched by correlation id), which reconnects with exponential
/// backoff and jitter. Loop-confined.
///
/// Each (re)connect resolves the host of the address it tries: a numeric address at once, a
/// name with a blocking lookup (once per connect, never per request). The resolved
/// addresses are tried in the resolver's order until one accepts the connection.
///
/// An endpoint may list several addresses of one service (stores over one database): the
/// link uses one at a time, and a failed connect or a dropped connection moves it to the
/// next address in order, wrapping, at once (within `AddressRotation.dropJitterMs` after
/// a drop); the backoff is paid once per round in which every address failed
/// (`AddressRotation`), and grows until a connection reaches HELLO_OK and stays open for
/// `stableConnectionMs` ([5.8-3]): a HELLO refused (BUSY) or a close right after the
/// connect is a failed attempt like a refused connect. Requests outstanding on a connection that ends fail with
/// `.disconnected` and are never sent again, to this address or another: a STORE whose
/// reply was lost may have been committed. Requests still queued (never sent) go to the
/// next connection, whichever address it is. The owner may also move the link on itself
/// (`moveOn`), when a server's answer says another address may do better.
///
/// `onDown` says why the connection went down, in words a person can act on: a GOAWAY's
/// reason, a TLS server that a plain client reached, a refusal. Failures that retrying
/// cannot cure (`ClientError.isPermanent`) stop the link when `stopOnPermanentFailure`,
/// whatever other addresses the endpoint lists: a credential one store refuses, its peers
/// over the same database refuse too. Without it they move the link on like any failure.
public final class ServerLink: ConnectionHandler {
    /// Where a link connects: one service's addresses, tried in order, and TLS for all of
    /// them when the service speaks it.
    public struct Endpoint: Sendable, CustomStringConvertible {
        public var addresses: AddressList
        public var tls: TLSContext?
        /// The name to verify the certificate against, when it is not the host of the address
        /// connected to.
        public var serverName: String?

        public init(_ addresses: AddressList, tls: TLSContext? = nil, serverName: String? = nil) {
            self.addresses = addresses
            self.tls = tls
            self.serverName = serverName
        }

        public init(_ address: HostPort, tls: TLSContext? = nil, serverName: String? = nil) {
            self.init(AddressList(address), tls: tls, serverName: serverName)
        }

        public init(host: String, port: Int, tls: TLSContext? = nil, serverName: String? = nil) {
            self.init(HostPort(host: host, port: port), tls: tls, serverName: serverName)
        }

        /// The first address: the one a link tries first.
        public var address: HostPort { addresses.first }
        public var host: String { address.host }
        public var port: Int { address.port }
        /// The addresses as the command line takes them: `HOST:PORT,HOST:PORT`.
        public var description: String { addresses.description }
    }

    public typealias Completion = (Result<Message, ClientError>) -> Void

    public let loop: EventLoop
    public let endpoint: Endpoint
    /// Made afresh for each connection (a provider credential carries a timestamp).
    private let makeHello: () -> Hello
    /// How long to wait for HELLO_OK, and for a started frame to finish.
    public var timeouts = SessionTimeouts()
    /// After each HELLO_OK.
    public var onReady: (() -> Void)?
    /// Frames the server starts (PUSH, MISSED, GOAWAY): the message and its correlation id.
    public var onServerMessage: ((Message, UInt32) -> Void)?
    /// The connection is down (it will retry unless the failure is permanent and
    /// `stopOnPermanentFailure` is set).
    public var onDown: ((ClientError) -> Void)?
    /// Every address of the endpoint has failed in a row since the last HELLO_OK (with one
    /// address: each failure), after their `onDown`s: a one-shot command gives up here. The
    /// link itself goes on retrying after its backoff.
    public var onEveryAddressFailed: (([AddressFailure]) -> Void)?
    /// Stop retrying after a failure that retrying cannot cure (a credential the server
    /// refuses, a certificate that does not verify): a bad credential will not get
    /// better; a busy server might. Queued requests then fail with that error.
    public var stopOnPermanentFailure = true
    /// A failure `ClientError.isPermanent` calls permanent that the owner knows may pass
    /// (a registration issued a moment ago, which the gateway has not heard of yet): it is
    /// retried like any other.
    public var mayPass: ((ClientError) -> Bool)?

    /// Whether the link stops for `error` (see `stopOnPermanentFailure` and `mayPass`).
    public func stopsFor(_ error: ClientError) -> Bool {
        stopOnPermanentFailure && error.isPermanent && !(mayPass?(error) ?? false)
    }

    private var connection: Connection?
    private var session = PeerSession<Void>(side: .client(SessionTimeouts()), now: 0)
    private var window = RequestWindow<Completion>(maxQueued: ServerLink.maxQueuedRequests)
    private var stopped = false
    /// The failure that stopped the link, for requests made after it.
    private var permanentFailure: ClientError?
    private var rotation: AddressRotation
    /// The failures of the current round, for `onEveryAddressFailed`.
    private var roundFailures: [AddressFailure] = []
    private var timer: LoopTimer?
    private var scratch: [UInt8] = []
    /// Why the current connection is ending, when the server said or showed it (a
    /// GOAWAY, a TLS record); reported once the connection is down.
    private var closeCause: ClientError?
    /// Whether the current connection has received any frame.
    private var heardFromServer = false
    /// While `moveOn` waits for the current connection's outstanding replies: until when.
    private var leavingUntil: Int64?
    /// When the current connection reached HELLO_OK; nil before (and between connections).
    private var readyAt: Int64?
    public static let maxQueuedRequests = 100_000

    public init(loop: EventLoop, endpoint: Endpoint, hello: @escaping () -> Hello) {
        self.loop = loop
        self.endpoint = endpoint
        self.makeHello = hello
        self.rotation = AddressRotation(count: endpoint.addresses.count)
    }

    /// The address connected to, or being tried (the one that failed, in `onDown`).
    public var currentAddress: HostPort { endpoint.addresses.addresses[rotation.index] }

    /// Whether a request made now is sent now (else it waits for a connection).
    public var isReady: Bool { isConnected && leavingUntil == nil }

    private var isConnected: Bool { connection != nil && session.acceptsRequests }

    /// Longest `moveOn` waits for outstanding replies; those still missing then fail with
    /// `.disconnected`, as on a connection that ends.
    public static let moveOnWaitMs: Int64 = 10_000

    /// How long a connection must stay open after HELLO_OK to end a run of failed attempts
    /// ([5.8-3]): a server that says HELLO_OK and then closes at once is retried with a
    /// growing wait, as one that refuses HELLO is.
    public static let stableConnectionMs: Int64 = 1_000

    public func start() {
        guard connection == nil, !stopped else { return }
        connect()
        timer = loop.schedule(after: .milliseconds(250), repeating: true) { [weak self] in self?.tick() }
    }

    /// Closes for good; outstanding and queued requests fail with `.stopped`.
    public func stop() {
        stopped = true
        timer?.cancel()
        timer = nil
        onDown = nil
        let closing = connection
        connection = nil
        closing?.close()
        fail(window.abandonAll(), .stopped)
    }

    /// Sends a request now or once connected; `completion` runs on the loop with the
    /// reply, an ERROR as `.status`, or the failure.
    public func request(_ message: Message, completion: @escaping Completion) {
        guard !stopped else { return completion(.failure(permanentFailure ?? .stopped)) }
        if isReady, window.hasRoom {
            send(message, completion: completion)
        } else if !window.enqueue(message, completion) {
            completion(.failure(.disconnected))
        }
    }

    /// A one-way message or a reply to the server's request (DELIVERY_ACK, PONG).
    @discardableResult
    public func reply(_ message: Message, correlation: UInt32) -> Bool {
        guard isConnected else { return false }
        return write(message, correlation: correlation)
    }

    // MARK: connection lifecycle

    private func connect() {
        let addresses: [SocketAddress]
        do {
            addresses = try currentAddress.resolve()
        } catch {
            // Reported from the loop, as a failed connect is, so that an owner who sets
            // `onDown` right after `start()` still hears of it.
            let failure = ClientError.connect(ConnectError(error))
            loop.schedule(after: .zero) { [weak self] in
                guard let self, !self.stopped, self.connection == nil else { return }
                self.down(failure, wasConnected: false)
            }
            return
        }
        attempt(addresses[...])
    }

    /// Connects to the first of `addresses`; a refusal or a socket error moves on to the
    /// next, and the last one's failure is what is reported.
    private func attempt(_ addresses: ArraySlice<SocketAddress>) {
        guard let address = addresses.first else { return down(.connect(.refused), wasConnected: false) }
        Connection.connect(loop: loop, to: address, tls: endpoint.tls, serverName: endpoint.serverName ?? currentAddress.host) {
            [weak self] result in
            guard let self, !self.stopped else {
                if case .success(let connection) = result { connection.close() }
                return
            }
            switch result {
            case .success(let connection):
                self.connection = connection
                connection.handler = self
                self.session = PeerSession(side: .client(self.timeouts), now: Clocks.monotonicMilliseconds())
                self.closeCause = nil
                self.heardFromServer = false
                self.window.restartNumbering()
                self.perform(self.session.start(self.makeHello(), correlation: self.window.takeCorrelation()))
            case .failure(let error):
                switch error {
                case .refused where addresses.count > 1, .system where addresses.count > 1:
                    self.attempt(addresses.dropFirst())
                default:
                    self.down(.connect(error), wasConnected: false)
                }
            }
        }
    }

    private func down(_ error: ClientError, wasConnected: Bool) {
        connection = nil
        leavingUntil = nil
        let stayedOpen = readyAt.map { Clocks.monotonicMilliseconds() - $0 >= ServerLink.stableConnectionMs } ?? false
        readyAt = nil
        fail(window.abandonOutstanding(), .disconnected)
        onDown?(error)
        if stopsFor(error), !stopped {
            stopped = true
            permanentFailure = error
            timer?.cancel()
            timer = nil
            fail(window.abandonAll(), error)
            return
        }
        guard !stopped else { return }
        roundFailures.append(AddressFailure(address: currentAddress, error: error))
        // The next address; the backoff only once every address has failed in a row.
        let shuttingDown = if case .goaway(.shuttingDown, _) = error { true } else { false }
        let step = rotation.failed(wasConnected: wasConnected, shuttingDown: shuttingDown, stayedOpen: stayedOpen)
        if step.everyAddressFailed {
            let failures = roundFailures
            roundFailures = []
            onEveryAddressFailed?(failures)
            guard !stopped else { return }
        }
        loop.schedule(after: .milliseconds(step.delayMs)) { [weak self] in
            guard let self, !self.stopped, self.connection == nil else { return }
            self.connect()
        }
    }

    /// Leaves the current address for the next one (wrapping), as a failure would but without
    /// one: requests made from now on wait, the connection is closed once the requests
    /// outstanding on it are answered (or after `moveOnWaitMs`), and the next address is
    /// connected to at once, not reported down. For an owner whose server answered in a way
    /// another address may not (BUSY from a node cut off from its peers). Nothing with one
    /// address, or while not connected or already moving on.
    public func moveOn() {
        guard endpoint.addresses.count > 1, isReady else { return }
        leavingUntil = Clocks.monotonicMilliseconds() + ServerLink.moveOnWaitMs
        // On the next turn: this may run in the completion of the last outstanding reply.
        let leaving = connection
        loop.schedule(after: .zero) { [weak self] in
            guard let self, self.connection === leaving else { return }
            self.leaveIfAnswered()
        }
    }

    private func leaveIfAnswered() {
        if leavingUntil != nil, window.outstanding.isEmpty { leave() }
    }

    /// Closes the connection `moveOn` is leaving (no GOAWAY: nothing is outstanding but
    /// what `moveOnWaitMs` gave up on, [5.5-6]) and connects to the next address.
    private func leave() {
        guard let connection else { return }
        leavingUntil = nil
        let stayedOpen = readyAt.map { Clocks.monotonicMilliseconds() - $0 >= ServerLink.stableConnectionMs } ?? false
        readyAt = nil
        self.connection = nil  // `onClose` ignores a connection that is no longer ours
        session.closed()
        connection.closeAfterFlush(timeout: .seconds(2))
        fail(window.abandonOutstanding(), .disconnected)
        rotation.movedOn(stayedOpen: stayedOpen)
        connect()
    }

    /// Closes the current connection on our side and reports it down once.
    private func drop(_ error: ClientError) {
        guard let connection else { return }
        self.connection = nil  // `onClose` ignores a connection that is no longer ours
        connection.close()
        down(error, wasConnected: true)
    }

    private func tick() {
        guard let connection else { return }
        if let until = leavingUntil, Clocks.monotonicMilliseconds() >= until { return leave() }
        let handshaking = session.phase == .handshaking
        let action = session.timerFired(now: Clocks.monotonicMilliseconds(), lastReceivedAt: connection.lastReadMillis,
                                        partialFrameSince: connection.partialFrameSinceMillis)
        if case .sendAndClose = action, handshaking {
            closeCause = heardFromServer ? .timedOut : .noHelloReply(closed: false)
        }
        perform(action)
    }

    // MARK: the session's actions

    public func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) {
        heardFromServer = true
        perform(session.received(header, body: body))
    }

    public func onFramingError(_ connection: Connection, error: WireError) {
        // A TLS record (an alert, a handshake) where HELLO_OK belongs: a TLS server.
        if session.phase == .handshaking, !heardFromServer {
            if case .badMagic(let byte) = error, byte == ServerLink.tlsAlertRecord || byte == ServerLink.tlsHandshakeRecord {
                closeCause = .serverSpeaksTLS
            } else {
                closeCause = .notSecurePush(error.description)
            }
        }
        perform(session.framingError(error))
    }

    /// The first byte of a TLS alert and of a TLS handshake record.
    static let tlsAlertRecord: UInt8 = 0x15
    static let tlsHandshakeRecord: UInt8 = 0x16

    public func onClose(_ connection: Connection, reason: CloseReason) {
        guard self.connection === connection else { return }
        let handshaking = session.phase == .handshaking
        session.closed()
        down(closeCause ?? (handshaking && !heardFromServer ? .noHelloReply(closed: true) : .disconnected), wasConnected: true)
    }

    private func perform(_ action: SessionAction) {
        switch action {
        case .none, .serve, .checkCredential:
            break
        case .send(let message, let correlation):
            write(message, correlation: correlation)
        case .sendAndClose(let message, let correlation):
            write(message, correlation: correlation)
            connection?.closeAfterFlush(timeout: .seconds(2))
        case .close:
            drop(closeCause ?? .disconnected)
        case .ready(let accepted):
            readyAt = Clocks.monotonicMilliseconds()
            rotation.connected()
            roundFailures = []
            window.maxInflight = Int(max(1, accepted.maxInflight))
            connection?.maxFrame = Int(accepted.maxFrame)
            onReady?()
            flushQueued()
        case .refused(let status, let text):
            drop(text == TLSContext.plainClientNotice ? .serverSpeaksTLS : .refused(status, text))
        case .deliver(let message, let correlation):
            deliver(message, correlation: correlation)
        case .malformedReply(let correlation, let error):
            window.complete(correlation)?(.failure(.status(error.status, error.description)))
            leaveIfAnswered()
        case .goaway(let goaway, let closeNow):
            closeCause = .goaway(goaway.status, goaway.message)
            onServerMessage?(.goaway(goaway), 0)
            // Requests above last_correlation were not carried out ([5.5-2]).
            fail(window.abandon(above: goaway.lastCorrelation), .disconnected)
            if closeNow { drop(.goaway(goaway.status, goaway.message)) }
        }
    }

    /// Refusals a retry cannot cure; BUSY, TIMEOUT or SHUTTING_DOWN might pass.
    static func isPermanentRefusal(_ status: Status) -> Bool {
        switch status {
        case .badCredentials, .badRequest, .unsupportedVersion, .forbidden, .authRequired: true
        default: false
        }
    }

    private func deliver(_ message: Message, correlation: UInt32) {
        switch message {
        case .push, .missed:
            onServerMessage?(message, correlation)
        case .error(let error):
            window.complete(correlation)?(.failure(.status(error.status, error.message)))
        default:
            // Replies are matched by correlation id alone; unknown ones are dropped ([5.3-5]).
            window.complete(correlation)?(.success(message))
        }
        leaveIfAnswered()
        flushQueued()
    }

    // MARK: writing

    private func flushQueued() {
        while isReady, let (message, correlation) = window.nextQueued() {
            transmit(message, correlation: correlation)
        }
    }

    private func send(_ message: Message, completion: @escaping Completion) {
        guard let correlation = window.begin(completion) else { return completion(.failure(.disconnected)) }
        transmit(message, correlation: correlation)
    }

    /// Writes a request the window has numbered; a frame over the negotiated maximum is
    /// refused here rather than sent to be refused ([5.2-3]).
    private func transmit(_ message: Message, correlation: UInt32) {
        scratch.removeAll(keepingCapacity: true)
        message.encode(correlation: correlation, into: &scratch)
        let limit = connection?.maxFrame ?? FrameLimits.defaultMaxFrame
        if scratch.count > limit {
            window.complete(correlation)?(.failure(.frameTooLarge(size: scratch.count, limit: limit)))
        } else if !writeScratch() {
            window.complete(correlation)?(.failure(.disconnected))
        }
        if scratch.capacity > 256 * 1024 { scratch = [] }
    }

    @discardableResult
    private func write(_ message: Message, correlation: UInt32) -> Bool {
        scratch.removeAll(keepingCapacity: true)
        message.encode(correlation: correlation, into: &scratch)
        return writeScratch()
    }

    private func writeScratch() -> Bool {
        guard let connection else { return false }
        session.sent(now: Clocks.monotonicMilliseconds())
        return connection.write(scratch)
    }

    private func fail(_ completions: [Completion], _ error: ClientError) {
        for completion in completions { completion(.failure(error)) }
    }
}
