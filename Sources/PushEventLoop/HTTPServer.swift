import CLibevent
import Glibc
import PushClock

/// An HTTP/1.1 server on one loop: libevent's evhttp, which parses requests, writes
/// responses and owns each connection. Loop-confined, like Listener.
///
/// evhttp answers some requests itself, with `Connection: close` and the connection closed
/// after, the body its small HTML page unless `errorPages` replaces it (see there); the
/// handler never sees them:
/// - a request line or header it cannot parse, an HTTP version other than 1.x, or a head
///   over `maxHeaderBytes`: 400;
/// - a body over `maxBodyBytes`, announced by Content-Length (even with
///   `Expect: 100-continue`) or as chunks arrive: 413.
/// The server itself refuses, 400 and closed after, what RFC 9112 says must be refused and
/// evhttp lets through (`HTTPRequestRefusal`): two Content-Lengths (evhttp would frame by
/// the first, and what followed it would be read as a request of its own), one that is
/// not digits alone, Transfer-Encoding other than `chunked` alone on 1.1 without
/// Content-Length, a 1.1 request without Host, two Hosts, two Authorizations, an obs-fold,
/// whitespace before a colon. Every refusal, evhttp's and these, is counted by reason
/// (`refusals`).
/// `Expect: 100-continue` within the limit gets its `100 Continue` once the head has passed
/// those checks and `vetContinue`, if set, has let it (see `HTTPContinueRequest`); chunked
/// bodies arrive whole. Every method reaches the handler (unknown ones as `.other`), so
/// it answers 405 itself. The path is what the request line holds between the method and
/// the version, query cut off, not decoded: it may hold spaces; an absolute-form target
/// (`http://host/p`) gives `/p`.
///
/// Connections: each takes a place in the `gate` from accept until evhttp frees it. Over
/// the cap, or over the cap for its address, a plain connection gets a fixed 503 (`errorPages`', or problem+json with code
/// BUSY; Retry-After: 1) and is closed; a TLS one is closed. A request must arrive whole within
/// `requestDeadline` of the connection opening or of the previous response being handed
/// over, else the connection is shut down; the time the handler holds a request does not
/// count.
public final class HTTPServer: LoopResource {
    public let loop: EventLoop
    public let limits: HTTPServerLimits
    public let tls: TLSContext?
    private let gate: HTTPConnectionGate
    /// nil: evhttp's own HTML pages are left as they are.
    let errorPages: HTTPErrorPages?
    let busyResponse: [UInt8]
    /// Dropped at stop(), so a handler that holds the server makes no cycle.
    private var handle: ((HTTPServerRequest) -> Void)?
    /// Asked about each `Expect: 100-continue` request before its body is read (a token, a
    /// route); nil lets every one continue. Dropped at stop(), like the handler.
    public var vetContinue: ((HTTPContinueRequest) -> Void)?
    private var http: OpaquePointer?
    private var sockets: [Int32] = []
    /// evhttp's handle of each listening socket, to stop accepting on it (`drain`).
    private var bound: [OpaquePointer] = []
    private var addresses: [SocketAddress]
    private var isShared: Bool
    /// By the connection's bufferevent.
    private var connections: [OpaquePointer: HTTPServerConnection] = [:]
    /// Accepted, and not yet given their evhttp connection (see `adoptNew`).
    private var unadopted: [HTTPServerConnection] = []
    private var adoptEvent: OpaquePointer?
    /// Connections whose output evhttp wrote to, to be looked at on this pass (see
    /// `HTTPErrorPages`).
    private var pendingOutput: [HTTPServerConnection] = []
    private var rewriteEvent: OpaquePointer?
    /// The drain's (see `drain`): its look at the connections, when it gives up waiting for
    /// answers to be written (monotonic ms; set once no request is held), and who waits.
    private var drainTimer: LoopTimer?
    private var drainLimitMs: Int64 = 0
    private var drainGivesUpAt: Int64?
    private var drainIsOver = false
    private var whenDrained: [() -> Void] = []
    /// Connections refused at the gate's cap.
    public private(set) var refusedAtCap: UInt64 = 0
    /// Connections refused at the gate's cap for one address.
    public private(set) var refusedPerAddress: UInt64 = 0
    /// Requests refused before the handler saw them, by `HTTPRequestRefusal.allCases` index.
    private var requestRefusals = [UInt64](repeating: 0, count: HTTPRequestRefusal.allCases.count)
    /// Connections closed by `requestDeadline`.
    public private(set) var closedAtDeadline: UInt64 = 0
    /// Open connections of this server (those holding a place in the gate).
    public private(set) var connectionCount = 0

    /// The bound port; 0 once stopped.
    public var port: Int { http == nil ? 0 : addresses[0].port }

    /// Binds host (numeric, may be "::1"; a name is resolved once, blocking) and port
    /// (0 = any free port).
    public convenience init(
        loop: EventLoop, host: String, port: Int, tls: TLSContext?, limits: HTTPServerLimits,
        gate: HTTPConnectionGate, errorPages: HTTPErrorPages? = nil, handle: @escaping (HTTPServerRequest) -> Void
    ) throws(EventLoopError) {
        guard loop.acceptsNewResources else { throw .libevent("the event loop has shut down") }
        let resolved = try SocketAddress.resolve(host: host, port: port, forListening: true)
        guard !resolved.isEmpty else { throw .invalidAddress(host) }
        let bound = try Listener.bindAll(resolved)
        try self.init(loop: loop, sockets: bound, tls: tls, shared: false, limits: limits, gate: gate, errorPages: errorPages,
                      handle: handle)
    }

    /// Accepts on `loop` from the same listening sockets as another HTTPServer (on
    /// another loop thread), with its TLS context; like Listener(loop:sharing:onAccept:).
    public convenience init(
        loop: EventLoop, sharing shared: SharedListenSockets, limits: HTTPServerLimits,
        gate: HTTPConnectionGate, errorPages: HTTPErrorPages? = nil, handle: @escaping (HTTPServerRequest) -> Void
    ) throws(EventLoopError) {
        guard loop.acceptsNewResources else { throw .libevent("the event loop has shut down") }
        let copies = try Listener.duplicate(shared.descriptors)
        let bound = zip(copies, shared.addresses).map { Listener.BoundSocket(fd: $0, address: $1) }
        try self.init(loop: loop, sockets: bound, tls: shared.tls, shared: true, limits: limits, gate: gate,
                      errorPages: errorPages, handle: handle)
    }

    /// Serves on `bound` (closed here on failure); shared sockets listen already.
    private init(
        loop: EventLoop, sockets bound: [Listener.BoundSocket], tls: TLSContext?, shared: Bool,
        limits: HTTPServerLimits, gate: HTTPConnectionGate, errorPages: HTTPErrorPages?,
        handle: @escaping (HTTPServerRequest) -> Void
    ) throws(EventLoopError) {
        self.loop = loop
        self.limits = limits
        self.tls = tls
        self.gate = gate
        self.errorPages = errorPages
        busyResponse = errorPages?.busyResponse() ?? HTTPServerConnection.busyResponse
        self.handle = handle
        self.addresses = bound.map(\.address)
        self.isShared = shared
        self.sockets = bound.map(\.fd)
        guard let http = evhttp_new(loop.base) else {
            for fd in sockets { Glibc.close(fd) }
            throw .libevent("evhttp_new failed")
        }
        self.http = http
        adoptEvent = event_new(loop.base, -1, 0, httpAdoptCallback, Unmanaged.passUnretained(self).toOpaque())
        rewriteEvent = event_new(loop.base, -1, 0, httpRewriteCallback, Unmanaged.passUnretained(self).toOpaque())
        configure(http)
        for socket in bound {
            // Not LEV_OPT_CLOSE_ON_FREE: `stop()` closes the sockets itself (see there).
            // Accepted sockets come back non-blocking and close-on-exec (accept4).
            guard let listener = evconnlistener_new(loop.base, nil, nil, sp_LEV_OPT_CLOSE_ON_EXEC,
                                                    shared ? 0 : 4096, socket.fd),
                  let handle = evhttp_bind_listener(http, listener)
            else {
                let code = errno
                evhttp_free(http)
                self.http = nil
                if let adoptEvent { event_free(adoptEvent) }
                if let rewriteEvent { event_free(rewriteEvent) }
                for fd in sockets { Glibc.close(fd) }
                throw .system(operation: "listen \(socket.address)", errno: code)
            }
            self.bound.append(handle)
        }
        loop.register(self)
        // Held by the C side until stop(), like a Listener.
        _ = Unmanaged.passRetained(self)
    }

    private func configure(_ http: OpaquePointer) {
        evhttp_set_max_headers_size(http, max(0, limits.maxHeaderBytes))
        evhttp_set_max_body_size(http, max(0, limits.maxBodyBytes))
        evhttp_set_allowed_methods(http, UInt16.max)
        // evhttp's own read and write timeouts are a second longer than the deadline, so a
        // request that stalls meets the deadline (counted) first; evhttp's then bounds only
        // how long a client may take to read a response.
        var timeout = timeval(limits.requestDeadline + .seconds(1))
        evhttp_set_timeout_tv(http, &timeout)
        let context = Unmanaged.passUnretained(self).toOpaque()
        evhttp_set_gencb(http, httpRequestCallback, context)
        evhttp_set_bevcb(http, httpBuffereventCallback, context)
    }

    /// The sockets this server accepts on, for `HTTPServer(loop:sharing:...)` on other loops.
    public func sharedSockets() throws(EventLoopError) -> SharedListenSockets {
        guard http != nil else { throw .libevent("the HTTP server is stopped") }
        let copies = try Listener.duplicate(sockets)
        isShared = true
        return SharedListenSockets(addresses: addresses, tls: tls, descriptors: copies)
    }

    /// Stops listening and closes every connection (evhttp_free); a request the handler
    /// still holds is then answered by nobody (its `respond` does nothing). The gate and
    /// `connectionCount` are given back at once; the sockets close on the next pass.
    /// Idempotent; also done when the loop shuts down.
    public func stop() {
        guard let http else { return }
        self.http = nil
        handle = nil
        vetContinue = nil
        drainTimer?.cancel()
        drainTimer = nil
        bound = []
        unadopted = []
        if let adoptEvent { event_free(adoptEvent) }
        adoptEvent = nil
        pendingOutput = []
        if let rewriteEvent { event_free(rewriteEvent) }
        rewriteEvent = nil
        // evhttp_free runs the close callback of the adopted connections (kept alive for
        // it); this also covers the others.
        let open = Array(connections.values)
        for connection in open { connection.closed() }
        withExtendedLifetime(open) { evhttp_free(http) }
        // The listeners were freed without closing their sockets: a shared socket must
        // outlive this pass's epoll changes (see closeAfterPendingChanges).
        for fd in sockets {
            if isShared { loop.closeAfterPendingChanges(fd) } else { Glibc.close(fd) }
        }
        sockets = []
        loop.unregister(self)
        let drained = whenDrained
        whenDrained = []
        for callback in drained { callback() }
        Unmanaged.passUnretained(self).release()
    }

    func closeForShutdown() { stop() }

    // MARK: - Drain

    /// Graceful stop, before `stop()`: every answer from now on closes its connection once
    /// written (`Connection: close`), and new connections are still taken, so that a client
    /// gets an answer (the handler's 503, say) rather than a refused connection. Once no
    /// connection holds a request (the handler has answered all it took, however long that
    /// takes), it stops accepting, closes the connections that wait for a next request, and
    /// waits for the others to finish writing their answers, for `within` at most; then
    /// `drained` runs, on the loop. Every caller's `drained` runs, at
    /// once if the drain is over or the server stopped.
    public func drain(within limit: Duration, then drained: @escaping () -> Void) {
        guard http != nil, !drainIsOver else { return drained() }
        whenDrained.append(drained)
        guard !isDraining else { return }
        isDraining = true
        drainLimitMs = limit.components.seconds * 1_000 + limit.components.attoseconds / 1_000_000_000_000_000
        // A few milliseconds' look is enough: answers are written within a loop pass or two,
        // and evhttp says nothing when a connection's output has gone out.
        drainTimer = loop.schedule(after: .milliseconds(5), repeating: true) { [weak self] in self?.drainStep() }
        drainStep()
    }

    /// Whether answers close their connections now (see `drain`).
    public private(set) var isDraining = false

    private func drainStep() {
        guard http != nil, !drainIsOver else { return }
        let now = Clocks.monotonicMilliseconds()
        if drainGivesUpAt == nil {
            guard !connections.values.contains(where: { $0.held != nil }) else { return }
            drainGivesUpAt = now + drainLimitMs
            stopAccepting()
        }
        for connection in connections.values { closeIfIdle(connection) }
        guard connections.isEmpty || now >= drainGivesUpAt ?? now else { return }
        drainIsOver = true
        drainTimer?.cancel()
        drainTimer = nil
        let drained = whenDrained
        whenDrained = []
        for callback in drained { callback() }
    }

    /// Closes the listening sockets; the connections stay evhttp's.
    private func stopAccepting() {
        guard let http else { return }
        for handle in bound { evhttp_del_accept_socket(http, handle) }
        bound = []
        for fd in sockets {
            if isShared { loop.closeAfterPendingChanges(fd) } else { Glibc.close(fd) }
        }
        sockets = []
    }

    /// A connection that holds no request and has nothing left to write waits for its next
    /// request: shut down, so that evhttp reads its end and frees it (as `requestDeadline`
    /// does). A request only partly read goes with it; it was not taken.
    private func closeIfIdle(_ connection: HTTPServerConnection) {
        guard connection.held == nil, let bev = connection.bev, let output = bufferevent_get_output(bev),
              evbuffer_get_length(output) == 0
        else { return }
        let fd = bufferevent_getfd(bev)
        if fd >= 0 { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    // MARK: - From the C callbacks

    /// A new connection's bufferevent (evhttp sets the socket on it). Its connection is
    /// adopted, and given its place in the gate, once evhttp has made it and knows its
    /// address, on this same loop pass (see `adoptNew`).
    fileprivate func newConnection() -> OpaquePointer? {
        let made: OpaquePointer?
        if let tls {
            guard let ssl = tls.makeServerSSL() else { return nil }
            made = bufferevent_openssl_socket_new(
                loop.base, -1, ssl, bufferevent_ssl_state(rawValue: UInt32(sp_BUFFEREVENT_SSL_ACCEPTING)),
                sp_BEV_OPT_CLOSE_ON_FREE)
            if made == nil { SSL_free(ssl) }
        } else {
            made = bufferevent_socket_new(loop.base, -1, sp_BEV_OPT_CLOSE_ON_FREE)
        }
        guard let bev = made else { return nil }
        let connection = HTTPServerConnection(server: self, gate: gate, tls: tls != nil, bev: bev)
        connections[bev] = connection
        unadopted.append(connection)
        if unadopted.count == 1, let adoptEvent { event_active(adoptEvent, Int32(sp_EV_TIMEOUT), 0) }
        return bev
    }

    /// Runs after the accept callback that made the connections, before the loop waits
    /// again: none of them can have been read from (or freed) yet.
    fileprivate func adoptNew() {
        let batch = unadopted
        unadopted = []
        for connection in batch { connection.adopt(loop: loop, deadline: limits.requestDeadline) }
    }

    /// evhttp wrote to `connection`'s output: looked at once the callback writing is over,
    /// still before the loop waits again and so before any of it reaches the socket (the
    /// bufferevent writes only when the socket is reported writable).
    func outputWritten(by connection: HTTPServerConnection) {
        pendingOutput.append(connection)
        if pendingOutput.count == 1, let rewriteEvent { event_active(rewriteEvent, Int32(sp_EV_TIMEOUT), 0) }
    }

    fileprivate func rewriteWritten() {
        let batch = pendingOutput
        pendingOutput = []
        for connection in batch { connection.lookAtOutput(errorPages) }
    }

    fileprivate func received(_ raw: OpaquePointer) {
        guard let evcon = evhttp_request_get_connection(raw),
              let bev = evhttp_connection_get_bufferevent(evcon),
              let connection = connections[bev]
        else {
            // Not a connection this server made (cannot happen): refuse rather than guess.
            evhttp_send_reply(raw, 500, nil, nil)
            return
        }
        if connection.isRefused {
            connection.refuseRequest(raw)
            return
        }
        if connection.isAnsweredBeforeBody {
            connection.dropAnsweredRequest(raw)
            return
        }
        if let refusal = connection.headRefusal() {
            connection.refuse(raw, refusal)
            return
        }
        let request = HTTPServerRequest(raw: raw, connection: connection)
        connection.requestTaken(request)
        handle?(request)
    }

    func countDeadlineClose() {
        closedAtDeadline += 1
    }

    func countRefusal(_ refusal: HTTPConnectionGate.Refusal) {
        switch refusal {
        case .atCap: refusedAtCap += 1
        case .perAddress: refusedPerAddress += 1
        }
    }

    func countRefusal(_ refusal: HTTPRequestRefusal) {
        if let index = HTTPRequestRefusal.allCases.firstIndex(of: refusal) { requestRefusals[index] += 1 }
    }

    /// Requests refused for `reason` before the handler saw them.
    public func refusals(_ reason: HTTPRequestRefusal) -> UInt64 {
        HTTPRequestRefusal.allCases.firstIndex(of: reason).map { requestRefusals[$0] } ?? 0
    }

    func connectionStarted() {
        connectionCount += 1
    }

    func connectionFinished() {
        connectionCount -= 1
    }

    func forget(_ bev: OpaquePointer) {
        connections.removeValue(forKey: bev)
    }
}

private func httpBuffereventCallback(_ base: OpaquePointer?, _ context: UnsafeMutableRawPointer?) -> OpaquePointer? {
    guard let context else { return nil }
    let server = Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue()
    return withExtendedLifetime(server) { server.newConnection() }
}

private func httpAdoptCallback(_ fd: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let server = Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue()
    withExtendedLifetime(server) { server.adoptNew() }
}

private func httpRewriteCallback(_ fd: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let server = Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue()
    withExtendedLifetime(server) { server.rewriteWritten() }
}

private func httpRequestCallback(_ raw: OpaquePointer?, _ context: UnsafeMutableRawPointer?) {
    guard let raw, let context else { return }
    let server = Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue()
    withExtendedLifetime(server) { server.received(raw) }
}
