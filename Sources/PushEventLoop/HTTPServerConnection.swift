import CLibevent
import Glibc

/// What the server knows of one connection evhttp owns: made in the bufferevent callback
/// when evhttp accepts, given evhttp's connection (`adopt`) right after evhttp has set it
/// up, and finished by evhttp's close callback, which evhttp_connection_free runs before
/// it frees the requests and the bufferevent. `bev` is valid until then.
final class HTTPServerConnection {
    private(set) var bev: OpaquePointer?
    weak var server: HTTPServer?
    private let gate: HTTPConnectionGate
    /// Over the gate's cap: answered 503 (or, for TLS, cut off) at once.
    let isRefused: Bool
    let isTLS: Bool
    /// Holds a place in the gate and in the server's count until `finish()`.
    private var isCounted: Bool
    private var deadline: LoopTimer?
    private(set) var refusalSent = false
    /// The request the handler holds, if any (not retained: a request dropped unanswered
    /// answers itself, see HTTPServerRequest).
    weak var held: HTTPServerRequest?

    init(server: HTTPServer, gate: HTTPConnectionGate, refused: Bool, tls: Bool, bev: OpaquePointer) {
        self.server = server
        self.gate = gate
        self.isRefused = refused
        self.isTLS = tls
        self.isCounted = !refused
        self.bev = bev
    }

    /// evhttp has made its connection on `bev` (its callbacks' argument) and set the socket:
    /// watch for its end, then refuse it or start its deadline.
    func adopt(loop: EventLoop, deadline limit: Duration) {
        guard let bev else { return }
        var evcon: UnsafeMutableRawPointer?
        bufferevent_getcb(bev, nil, nil, nil, &evcon)
        guard let evcon else {
            // evhttp could not make its connection (out of memory) and left the
            // bufferevent to us. (Should it have freed it after making the connection, also
            // only out of memory, this would read freed memory: libevent 2.1 says nothing.)
            bufferevent_free(bev)
            closed()
            return
        }
        evhttp_connection_set_closecb(OpaquePointer(evcon), httpConnectionCloseCallback, Unmanaged.passUnretained(self).toOpaque())
        if isRefused {
            refuseNow()
        } else {
            deadline = loop.schedule(after: limit) { [weak self] in self?.deadlinePassed() }
        }
    }

    /// A request reached the handler: its time no longer counts against the client.
    func requestTaken(_ request: HTTPServerRequest) {
        held = request
        deadline?.cancel()
    }

    func responseHandedOver() {
        held = nil
        guard bev != nil, let server, let deadline else { return }
        deadline.reschedule(after: server.limits.requestDeadline)
    }

    /// The 503 for a refused connection, written straight to the socket; the shutdown
    /// makes evhttp see EOF and free the connection. A TLS client gets only the shutdown.
    private func refuseNow() {
        guard let bev, !refusalSent else { return }
        refusalSent = true
        let fd = bufferevent_getfd(bev)
        guard fd >= 0 else { return }
        if !isTLS {
            let response = HTTPServerConnection.busyResponse
            _ = response.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
        }
        shutdown(fd, Int32(SHUT_RDWR))
    }

    /// A request that arrives on a refused connection (read before the shutdown took
    /// effect) is answered again through evhttp: the write fails and ends the connection.
    func refuseRequest(_ raw: OpaquePointer) {
        refusalSent = true
        if let output = evhttp_request_get_output_headers(raw) {
            for (name, value) in HTTPServerConnection.busyHeaders { _ = evhttp_add_header(output, name, value) }
        }
        if let buffer = evhttp_request_get_output_buffer(raw) {
            let body = HTTPServerConnection.busyBody
            _ = body.withUnsafeBytes { evbuffer_add(buffer, $0.baseAddress, $0.count) }
        }
        evhttp_send_reply(raw, 503, "Service Unavailable", nil)
    }

    private func deadlinePassed() {
        guard let bev, held == nil else { return }
        let fd = bufferevent_getfd(bev)
        guard fd >= 0 else { return }
        server?.countDeadlineClose()
        shutdown(fd, Int32(SHUT_RDWR))
    }

    /// evhttp is freeing the connection (its close callback, or the server stopping):
    /// a request still on it goes with it, and nothing may touch the bufferevent after.
    func closed() {
        if let held, held.isOnConnection { held.connectionFreed() }
        held = nil
        deadline?.cancel()
        deadline = nil
        if let bev { server?.forget(bev) }
        bev = nil
        finish()
    }

    /// Gives back the connection's places; once.
    func finish() {
        guard isCounted else { return }
        isCounted = false
        gate.leave()
        server?.connectionFinished()
    }

    static let busyBody = Array(
        #"{"type":"about:blank","title":"Service Unavailable","status":503,"code":"BUSY","detail":"too many open connections, retry later"}"#.utf8)
    static let busyHeaders = [
        ("Content-Type", "application/problem+json"), ("Connection", "close"), ("Retry-After", "1"),
    ]
    static let busyResponse: [UInt8] = {
        var text = "HTTP/1.1 503 Service Unavailable\r\n"
        for (name, value) in busyHeaders { text += "\(name): \(value)\r\n" }
        text += "Content-Length: \(busyBody.count)\r\n\r\n"
        return Array(text.utf8) + busyBody
    }()
}

/// evhttp's close callback, run by evhttp_connection_free before it frees the requests.
func httpConnectionCloseCallback(_ evcon: OpaquePointer?, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let connection = Unmanaged<HTTPServerConnection>.fromOpaque(context).takeUnretainedValue()
    withExtendedLifetime(connection) { connection.closed() }
}
