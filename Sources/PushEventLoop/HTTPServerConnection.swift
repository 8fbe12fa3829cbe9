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
    /// Set while a response of ours goes into the output, which the output watch then lets by.
    var writingOwn = false
    /// evhttp's output buffer callback, when the server replaces its error pages.
    private var outputWatch: OpaquePointer?
    /// What evhttp wrote waits to be looked at (`replaceErrorPage`); `outputBefore` bytes
    /// were in the buffer before it.
    private var rewriteDue = false
    private var outputBefore = 0

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
        if server?.errorPages != nil, let output = bufferevent_get_output(bev) {
            outputWatch = evbuffer_add_cb(output, httpOutputCallback, Unmanaged.passUnretained(self).toOpaque())
        }
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
            let response = server?.busyResponse ?? HTTPServerConnection.busyResponse
            _ = response.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
        }
        shutdown(fd, Int32(SHUT_RDWR))
    }

    /// A request that arrives on a refused connection (read before the shutdown took
    /// effect) is answered again through evhttp: the write fails and ends the connection.
    func refuseRequest(_ raw: OpaquePointer) {
        refusalSent = true
        var headers = HTTPServerConnection.busyHeaders
        var body = HTTPServerConnection.busyBody
        if let pages = server?.errorPages {
            headers[0].1 = pages.contentType
            body = pages.body(503, "Service Unavailable")
        }
        if let output = evhttp_request_get_output_headers(raw) {
            for (name, value) in headers { _ = evhttp_add_header(output, name, value) }
        }
        if let buffer = evhttp_request_get_output_buffer(raw) {
            _ = body.withUnsafeBytes { evbuffer_add(buffer, $0.baseAddress, $0.count) }
        }
        writingOwn = true
        evhttp_send_reply(raw, 503, "Service Unavailable", nil)
        writingOwn = false
    }

    /// Bytes went into the output buffer: when not ours, evhttp's (a `100 Continue` or an
    /// error page), looked at later on this pass.
    func outputAdded(_ info: evbuffer_cb_info) {
        guard info.n_added > 0, !writingOwn, !rewriteDue else { return }
        rewriteDue = true
        outputBefore = info.orig_size
        server?.outputWritten(by: self)
    }

    /// Replaces the error page evhttp wrote by `pages`' (see `HTTPErrorPages`), keeping what
    /// was in the buffer before it (a `100 Continue` not yet sent). Left alone when larger
    /// than anything evhttp writes of its own.
    func replaceErrorPage(_ pages: HTTPErrorPages) {
        guard rewriteDue else { return }
        rewriteDue = false
        guard let bev, let output = bufferevent_get_output(bev) else { return }
        let length = evbuffer_get_length(output)
        guard length > outputBefore, length <= 4096 else { return }
        // The buffer's start is found frozen here at times (seen for a chunk over the limit
        // after a 100 Continue; cause not traced in libevent), which refuses copying out and
        // draining: thawed for this, then frozen again.
        let copy = { [UInt8](unsafeUninitializedCapacity: length) { bytes, count in
            count = max(0, evbuffer_copyout(output, bytes.baseAddress, length))
        } }
        var written = copy()
        let wasFrozen = written.count != length
        if wasFrozen {
            evbuffer_unfreeze(output, 1)
            written = copy()
        }
        defer { if wasFrozen { evbuffer_freeze(output, 1) } }
        guard written.count == length, let replacement = pages.replacing(Array(written[outputBefore...])) else { return }
        writingOwn = true
        evbuffer_drain(output, length)
        let whole = Array(written[..<outputBefore]) + replacement
        _ = whole.withUnsafeBytes { evbuffer_add(output, $0.baseAddress, $0.count) }
        writingOwn = false
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
        if let outputWatch, let bev, let output = bufferevent_get_output(bev) { evbuffer_remove_cb_entry(output, outputWatch) }
        outputWatch = nil
        rewriteDue = false
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

/// The watch on a connection's output buffer (`HTTPServerConnection.outputAdded`).
func httpOutputCallback(_ buffer: OpaquePointer?, _ info: UnsafePointer<evbuffer_cb_info>?, _ context: UnsafeMutableRawPointer?) {
    guard let info, let context else { return }
    let connection = Unmanaged<HTTPServerConnection>.fromOpaque(context).takeUnretainedValue()
    withExtendedLifetime(connection) { connection.outputAdded(info.pointee) }
}

/// evhttp's close callback, run by evhttp_connection_free before it frees the requests.
func httpConnectionCloseCallback(_ evcon: OpaquePointer?, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let connection = Unmanaged<HTTPServerConnection>.fromOpaque(context).takeUnretainedValue()
    withExtendedLifetime(connection) { connection.closed() }
}
