import CNats
import Glibc
import PushClock
import PushEventLoop

/// A NATS client connection on an `EventLoop`: libnats in its external-event-loop mode,
/// its socket watched by the loop (see `NATSSocketDriver`). Loop-confined.
///
/// Connects in the background and retries for ever, so a server started later is found
/// (libnats gives up only when a server refuses it twice in a row with the same
/// authorization error: then `.closed` comes with `gaveUpReason` set, or, with `reopen`
/// settings, `.gaveUp` and a new libnats connection later, see `ReopenSettings`);
/// reconnects by itself and resubscribes; publishes made while disconnected wait in
/// libnats' reconnect buffer (8 MiB). Every callback runs on the loop thread.
///
/// The first connection attempt happens inside `init` (libnats' design): a refused
/// connection returns at once, an unreachable host can hold the loop for up to
/// `connectTimeout`.
public final class NATSConnection {
    let loop: EventLoop
    var connection: OpaquePointer?
    /// The socket driver and event relay of the libnats connection open now (each
    /// libnats connection gets its own: a closed one's are never used again).
    var driver: NATSSocketDriver
    var relay: NATSEventRelay
    /// What each libnats connection is opened with, the first and any reopened one.
    let settings: Settings
    /// Set while libnats' giving up is answered by opening a new connection.
    var reopen: ReopenState?
    /// Live subscriptions, in subscribe order: the connection keeps them (a caller may
    /// drop its NATSSubscription and still get messages until `cancel()`).
    var subscriptions: [NATSSubscription] = []
    var requests = NATSRequests()

    /// Connection events, on the loop: `.connected` once the first connection is made,
    /// then `.disconnected` / `.reconnected` as the link comes and goes (a reopened
    /// connection's first link included), `.gaveUp` when libnats gave up and a new
    /// connection will be opened, `.closed` after `close()` or when libnats gave up for good.
    public var onEvent: ((NATSConnectionEvent) -> Void)?

    /// The reconnect buffer: what publishes made while disconnected can hold.
    public static let reconnectBufferBytes: Int32 = 8 * 1024 * 1024

    /// How a dead server link is noticed: libnats sends a PING every `interval` and
    /// drops the link when more than `maxOutstanding` go unanswered, so a link that went
    /// silent is noticed within `interval` × (`maxOutstanding` + 1).
    public struct PingSettings: Sendable, Equatable {
        public var interval: Duration
        public var maxOutstanding: Int32

        public init(interval: Duration, maxOutstanding: Int32) {
            self.interval = interval
            self.maxOutstanding = maxOutstanding
        }

        /// About 30 s to notice, instead of libnats' default 4 minutes.
        public static let standard = PingSettings(interval: .seconds(10), maxOutstanding: 3)
    }

    /// Why libnats gave up on the connection by itself, if it did: then it stays closed,
    /// or, with `ReopenSettings`, until a reopened connection is up.
    public internal(set) var gaveUpReason: String?

    /// `Clocks.monotonicMilliseconds()` when the socket last brought anything (a PONG
    /// included), or when the link was last made.
    public internal(set) var lastInboundMs: Int64 = Clocks.monotonicMilliseconds()

    /// - Parameters:
    ///   - servers: `nats://HOST:PORT` URLs, tried in order (libnats randomizes none here).
    ///   - name: the client name the server shows for this connection.
    ///   - connectTimeout: each attempt's TCP connect and handshake.
    ///   - ping: how a dead link is noticed.
    ///   - security: TLS and credentials (`NATSSecurity`); none by default.
    ///   - reopen: whether, and how soon, a connection libnats gave up on is opened again;
    ///     nil (the default): it stays closed.
    public init(loop: EventLoop, servers: [String], name: String, connectTimeout: Duration = .seconds(1),
                ping: PingSettings = .standard, security: NATSSecurity = NATSSecurity(),
                reopen: ReopenSettings? = nil) throws(NATSError) {
        guard !servers.isEmpty else { throw .invalidURL("no servers") }
        for server in servers { try NATSNames.checkServer(server) }
        self.loop = loop
        settings = Settings(servers: servers, name: name, connectTimeout: connectTimeout, ping: ping, security: security,
                            reopen: reopen)
        let link = try NATSConnection.open(on: loop, settings)
        driver = link.driver
        relay = link.relay
        connection = link.connection
        adopt(link)
    }

    deinit {
        close(failingWith: .notConnected, deferred: false)
    }

    /// The servers, tried in the order given, the connection's name and the connect timeout.
    static func configureServers(_ options: OpaquePointer, servers: [String], name: String, timeout: Duration) throws(NATSError) {
        let copies = servers.map { strdup($0) }
        defer { for copy in copies { free(copy) } }
        var pointers = copies.map { $0.map { UnsafePointer($0) } }
        try check(natsOptions_SetServers(options, &pointers, Int32(pointers.count)))
        try check(natsOptions_SetName(options, name))
        try check(natsOptions_SetNoRandomize(options, true))
        try check(natsOptions_SetTimeout(options, milliseconds(timeout)))
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        max(1, duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000)
    }

    static func check(_ status: natsStatus) throws(NATSError) {
        guard status == NATS_OK else { throw NATSError.library(status) }
    }

    /// True while a server link is up (libnats' own status, so true as soon as a reconnect
    /// completed, even before `.reconnected` has been delivered).
    public var isConnected: Bool {
        guard let connection else { return false }
        return natsConnection_Status(connection) == NATS_CONN_STATUS_CONNECTED
    }

    /// libnats' counters for this connection.
    public var statistics: NATSStatistics {
        guard let connection else { return NATSStatistics() }
        var stats: OpaquePointer?
        guard natsStatistics_Create(&stats) == NATS_OK, let stats else { return NATSStatistics() }
        defer { natsStatistics_Destroy(stats) }
        guard natsConnection_GetStats(connection, stats) == NATS_OK else { return NATSStatistics() }
        var result = NATSStatistics()
        natsStatistics_GetCounts(stats, &result.inMsgs, &result.inBytes, &result.outMsgs, &result.outBytes, &result.reconnects)
        return result
    }

    /// Publishes `data` (with `headers`, if any). While disconnected it waits in the
    /// reconnect buffer; a full buffer fails with `.library(NATS_INSUFFICIENT_BUFFER)`.
    public func publish(_ subject: String, _ data: [UInt8], reply: String? = nil, headers: [(String, String)] = []) throws(NATSError) {
        try NATSNames.checkSubject(subject)
        if let reply { try NATSNames.checkSubject(reply) }
        for (name, value) in headers { try NATSNames.checkHeader(name, value) }
        guard let connection else { throw .notConnected }
        let status: natsStatus
        if headers.isEmpty {
            status = data.withUnsafeBytes { bytes in
                if let reply {
                    natsConnection_PublishRequest(connection, subject, reply, bytes.baseAddress, Int32(bytes.count))
                } else {
                    natsConnection_Publish(connection, subject, bytes.baseAddress, Int32(bytes.count))
                }
            }
        } else {
            status = NATSConnection.publishWithHeaders(connection, subject, reply, data, headers)
        }
        try NATSConnection.check(status)
    }

    private static func publishWithHeaders(
        _ connection: OpaquePointer, _ subject: String, _ reply: String?, _ data: [UInt8], _ headers: [(String, String)]
    ) -> natsStatus {
        var message: OpaquePointer?
        var status = data.withUnsafeBytes { bytes in
            natsMsg_Create(&message, subject, reply, bytes.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(bytes.count))
        }
        guard status == NATS_OK, let message else { return status }
        defer { natsMsg_Destroy(message) }
        for (name, value) in headers where status == NATS_OK {
            status = natsMsgHeader_Add(message, name, value)
        }
        guard status == NATS_OK else { return status }
        return natsConnection_PublishMsg(connection, message)
    }

    /// Messages on `subject` (wildcards allowed) go to `handler` on the loop thread until
    /// the subscription is cancelled or the connection closed. Kept across reconnects, and
    /// made again on a reopened connection.
    @discardableResult
    public func subscribe(_ subject: String, _ handler: @escaping (NATSMessage) -> Void) throws(NATSError) -> NATSSubscription {
        try NATSNames.checkSubject(subject, wildcards: true)
        let subscription = NATSSubscription(connection: self, subject: subject, handler: handler)
        if let connection {
            try subscription.bind(to: connection)
        } else if reopen == nil {
            throw .notConnected
        }
        // While waiting to reopen: made on the next connection, with the others.
        subscriptions.append(subscription)
        return subscription
    }

    /// A unique subject under libnats' inbox prefix (`_INBOX.`), for replies.
    public func newInbox() -> String {
        var inbox: UnsafeMutablePointer<natsInbox>?
        guard natsInbox_Create(&inbox) == NATS_OK, let inbox else {
            // Only an allocation failure gets here; a serial under a fixed prefix is still unique.
            requests.serial &+= 1
            return "_INBOX.SP\(requests.serial)"
        }
        defer { natsInbox_Destroy(inbox) }
        return String(cString: inbox)
    }

    /// Closes and destroys the libnats connection (its reconnect thread is joined), stops
    /// watching its socket and fails pending requests with `.notConnected`, in a later loop
    /// iteration. Idempotent.
    public func close() {
        close(failingWith: .notConnected, deferred: true)
    }

    func close(failingWith error: NATSError, deferred: Bool) {
        let wasReopening = reopen != nil && connection == nil
        reopen?.timer?.cancel()
        reopen = nil
        let dropped = subscriptions
        subscriptions = []
        if let closing = connection {
            connection = nil
            endLink(closing, failingWith: error, deferred: deferred)
        }
        for subscription in dropped { subscription.release() }
        // No libnats connection is left to report its close: said here.
        if wasReopening { loop.schedule(after: .zero) { [weak self] in self?.onEvent?(.closed) } }
    }

    /// Closes and destroys one libnats connection; the subscriptions keep their handlers.
    func endLink(_ closing: OpaquePointer, failingWith error: NATSError, deferred: Bool) {
        // Sent without waiting: natsConnection_Close would ask the loop to write what is
        // buffered, and the loop is busy here.
        if driver.wantsWrite { natsConnection_ProcessWriteEvent(closing) }
        natsConnection_Close(closing)
        // Freed after the close, which marked them closed: no UNSUB for each goes out.
        for subscription in subscriptions { subscription.unbind() }
        let orphans = requests.removeAll()
        natsConnection_Destroy(closing)
        driver.stop()
        guard !orphans.isEmpty else { return }
        if deferred {
            loop.schedule(after: .zero) { for completion in orphans { completion(.failure(error)) } }
        } else {
            for completion in orphans { completion(.failure(error)) }
        }
    }

    /// The loop is shutting down and will run nothing later: close now, fail now.
    func loopShutDown() {
        close(failingWith: .notConnected, deferred: false)
    }

    func deliver(_ event: NATSConnectionEvent) {
        var event = event
        if event == .connected || event == .reconnected {
            lastInboundMs = Clocks.monotonicMilliseconds()
            if reopen != nil {
                // A reopened connection's first link: to its user, a reconnect.
                reopened()
                event = .reconnected
            }
        }
        if event == .closed, let closing = connection {
            // libnats gave up by itself: with reconnects unlimited, only after a server
            // refused it twice in a row with the same authorization error.
            var text: UnsafePointer<CChar>?
            let status = natsConnection_GetLastError(closing, &text)
            gaveUpReason = text.map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
                ?? String(cString: natsStatus_GetText(status))
            if settings.reopen != nil {
                connection = nil
                endLink(closing, failingWith: .notConnected, deferred: false)
                scheduleReopen()
                event = .gaveUp
            } else {
                close(failingWith: .notConnected, deferred: false)
            }
        }
        onEvent?(event)
    }

    /// Hands every message the last read event queued to its handler (request replies
    /// first), subscription by subscription. A handler may subscribe, cancel or close: the list is a snapshot and
    /// each subscription checks it is still live.
    func deliverMessages() {
        deliverReplies()
        for subscription in subscriptions {
            guard connection != nil else { return }
            subscription.drain()
        }
    }
}
