import CLibevent
import Glibc

/// What the server knows of one connection evhttp owns: made in the bufferevent callback
/// when evhttp accepts, given evhttp's connection (`adopt`) right after evhttp has set it
/// up, and finished by evhttp's close callback, which evhttp_connection_free runs before
/// it frees the requests and the bufferevent. `bev` is valid until then.
///
/// It also keeps the raw bytes of the request head being read (`recorder`; evhttp consumes
/// a head line by line), for the checks evhttp does not make (`HTTPRequestHead.refusal`)
/// and for `Expect: 100-continue`: evhttp's `100 Continue` is held back from the output
/// until the server's owner has looked at the head (`HTTPContinueRequest`).
final class HTTPServerConnection {
    private(set) var bev: OpaquePointer?
    weak var server: HTTPServer?
    private let gate: HTTPConnectionGate
    /// Over one of the gate's caps: answered 503 (or, for TLS, cut off) at once.
    private(set) var isRefused = false
    let isTLS: Bool
    /// Numeric address of the client, once adopted.
    private(set) var peerAddress = ""
    /// Holds a place in the gate and in the server's count until `finish()`.
    private var isCounted = false
    private var recorder: HTTPHeadRecorder
    private var inputWatch: OpaquePointer?
    /// evhttp's `100 Continue` is held back while the owner decides (`HTTPContinueRequest`).
    private var continueHeld: [UInt8]?
    /// A response went out before the body was read: the connection ends once it is written.
    private var answeredBeforeBody = false
    /// Counts the heads read on the connection, so a late decision on one does not let
    /// the next continue.
    private(set) var headNumber = 0
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

    init(server: HTTPServer, gate: HTTPConnectionGate, tls: Bool, bev: OpaquePointer) {
        self.server = server
        self.gate = gate
        self.isTLS = tls
        self.bev = bev
        // Above evhttp's own limit, which counts the lines without their ends.
        recorder = HTTPHeadRecorder(limit: 2 * server.limits.maxHeaderBytes + 1024)
    }

    /// evhttp has made its connection on `bev` (its callbacks' argument) and set the socket:
    /// watch for its end, take a place in the gate for its address, then refuse it or start
    /// its deadline.
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
        let context = Unmanaged.passUnretained(self).toOpaque()
        evhttp_connection_set_closecb(OpaquePointer(evcon), httpConnectionCloseCallback, context)
        var address: UnsafeMutablePointer<CChar>?
        var port: UInt16 = 0
        evhttp_connection_get_peer(OpaquePointer(evcon), &address, &port)
        if let address { peerAddress = String(cString: address) }
        if let refusal = gate.enter(from: peerAddress) {
            isRefused = true
            server?.countRefusal(refusal)
        } else {
            isCounted = true
            server?.connectionStarted()
        }
        if let output = bufferevent_get_output(bev) { outputWatch = evbuffer_add_cb(output, httpOutputCallback, context) }
        if isRefused {
            refuseNow()
        } else {
            if let input = bufferevent_get_input(bev) { inputWatch = evbuffer_add_cb(input, httpInputCallback, context) }
            deadline = loop.schedule(after: limit) { [weak self] in self?.deadlinePassed() }
        }
    }

    /// A request reached the handler: its time no longer counts against the client, and
    /// what follows it in the input starts the next head.
    func requestTaken(_ request: HTTPServerRequest) {
        held = request
        deadline?.cancel()
        restartHead()
    }

    /// Bytes came in: the head being read is kept until it is whole.
    func inputAdded(_ buffer: OpaquePointer, _ info: evbuffer_cb_info) {
        guard info.n_added > 0, recorder.isOpen else { return }
        let length = evbuffer_get_length(buffer)
        let count = min(info.n_added, recorder.room, length)
        guard count > 0 else { return }
        var position = evbuffer_ptr()
        guard evbuffer_ptr_set(buffer, &position, length - info.n_added, EVBUFFER_PTR_SET) == 0 else { return }
        recorder.append(EvbufferBytes.copy(buffer, count: count, from: position))
    }

    /// The request's head broke a rule evhttp does not check, or nil. A head evhttp read
    /// but the recorder did not keep whole (which should not happen: its limit is above
    /// evhttp's) is refused rather than let through unchecked.
    func headRefusal() -> HTTPRequestRefusal? {
        guard let bytes = recorder.head else { return .headTooLarge }
        switch HTTPRequestHead.check(bytes) {
        case .passes: return nil
        case .refused(let refusal): return refusal
        case .unreadable: return .malformed
        }
    }

    /// Whether a response was already sent for the request being read (see `answerBeforeBody`).
    var isAnsweredBeforeBody: Bool { answeredBeforeBody }

    private func restartHead() {
        continueHeld = nil
        headNumber += 1
        guard let bev, let input = bufferevent_get_input(bev) else { return }
        let length = min(evbuffer_get_length(input), recorder.limit + 1)
        recorder.restart(with: EvbufferBytes.copy(input, count: length))
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
            body = pages.body(503, "Service Unavailable", nil)
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

    /// Answers a request whose head broke a rule (`HTTPRequestHead.refusal`), through evhttp,
    /// with `Connection: close`: evhttp closes the connection once it is written, so
    /// nothing after the request on the connection is read as another.
    func refuse(_ raw: OpaquePointer, _ refusal: HTTPRequestRefusal) {
        server?.countRefusal(refusal)
        let (contentType, body) = HTTPServerConnection.refusalBody(refusal, pages: server?.errorPages)
        if let output = evhttp_request_get_output_headers(raw) {
            _ = evhttp_add_header(output, "Content-Type", contentType)
            // evhttp gives an HTTP/1.0 response none, its end being the close.
            _ = evhttp_add_header(output, "Content-Length", "\(body.count)")
            _ = evhttp_add_header(output, "Connection", "close")
        }
        if let buffer = evhttp_request_get_output_buffer(raw) {
            _ = body.withUnsafeBytes { evbuffer_add(buffer, $0.baseAddress, $0.count) }
        }
        writingOwn = true
        evhttp_send_reply(raw, Int32(refusal.status), HTTPServerConnection.reason(refusal.status), nil)
        writingOwn = false
    }

    /// The body of the answer to a refused request: the pages', else the detail as text.
    static func refusalBody(_ refusal: HTTPRequestRefusal, pages: HTTPErrorPages?) -> (String, [UInt8]) {
        guard let pages else { return ("text/plain; charset=utf-8", Array((refusal.detail + "\n").utf8)) }
        return (pages.contentType, pages.body(refusal.status, reason(refusal.status), refusal.detail))
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 413: "Request Entity Too Large"
        case 417: "Expectation Failed"
        default: "Bad Request"
        }
    }

    /// A whole response: status line, `headers`, Content-Length, `Connection: close`, body.
    static func response(status: Int, reason: String, headers: [(String, String)], body: [UInt8]) -> [UInt8] {
        let code = (100...999).contains(status) ? status : 500
        let clean = { (text: String) in String(text.filter { $0 != "\r" && $0 != "\n" }) }
        var head = "HTTP/1.1 \(code) \(clean(reason))\r\n"
        for (name, value) in headers where name.lowercased() != "connection" && name.lowercased() != "content-length" {
            head += "\(clean(name)): \(clean(value))\r\n"
        }
        head += "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        return Array(head.utf8) + body
    }

    /// evhttp's `100 Continue`, held back (`lookAtOutput`): the head is checked, then its
    /// owner asks the server's owner (`HTTPServer.vetContinue`) or lets it go at once.
    private func holdContinue(_ line: [UInt8]) {
        continueHeld = line
        let parsed = recorder.head.flatMap(HTTPRequestHead.parse)
        if let refusal = headRefusal() {
            server?.countRefusal(refusal)
            let (contentType, body) = HTTPServerConnection.refusalBody(refusal, pages: server?.errorPages)
            return answerBeforeBody(HTTPServerConnection.response(status: refusal.status, reason: HTTPServerConnection.reason(refusal.status),
                                                                  headers: [("Content-Type", contentType)], body: body),
                                    head: headNumber)
        }
        guard let parsed, let server, let vet = server.vetContinue else { return sendContinue(headNumber) }
        vet(HTTPContinueRequest(head: parsed, peerHost: peerAddress, connection: self, headNumber: headNumber))
    }

    /// Lets the client send its body: the held `100 Continue` goes out.
    func sendContinue(_ head: Int) {
        guard head == headNumber, let line = continueHeld else { return }
        continueHeld = nil
        write(line)
    }

    /// Answers the request being read before its body: `response` goes out, the connection
    /// is shut for writing once it is written (the client's close then ends it), and a body
    /// sent anyway reaches no handler.
    func answerBeforeBody(_ response: [UInt8], head: Int) {
        guard head == headNumber, continueHeld != nil else { return }
        continueHeld = nil
        answeredBeforeBody = true
        write(response)
    }

    private func write(_ bytes: [UInt8]) {
        guard let bev, let output = bufferevent_get_output(bev) else { return }
        writingOwn = true
        _ = bytes.withUnsafeBytes { evbuffer_add(output, $0.baseAddress, $0.count) }
        writingOwn = false
        // evhttp may have stopped writing when it found its 100 Continue gone.
        bufferevent_enable(bev, Int16(EV_WRITE))
    }

    /// A body arrived for a request already answered (`answerBeforeBody`): ends the connection.
    func dropAnsweredRequest(_ raw: OpaquePointer) {
        if let bev { shutdown(bufferevent_getfd(bev), Int32(SHUT_RDWR)) }
        writingOwn = true
        evhttp_send_reply(raw, 400, "Bad Request", nil)
        writingOwn = false
    }

    /// Bytes went into the output buffer: when not ours, evhttp's (a `100 Continue` or an
    /// error page), looked at later on this pass.
    func outputAdded(_ buffer: OpaquePointer, _ info: evbuffer_cb_info) {
        if answeredBeforeBody, info.n_deleted > 0, evbuffer_get_length(buffer) == 0, let bev {
            shutdown(bufferevent_getfd(bev), Int32(SHUT_WR))
        }
        guard info.n_added > 0, !writingOwn, !rewriteDue else { return }
        rewriteDue = true
        outputBefore = info.orig_size
        server?.outputWritten(by: self)
    }

    /// Looks at what evhttp wrote, keeping what was in the buffer before it: a `100 Continue`
    /// is held back (`holdContinue`); an error page of its own is counted and replaced by
    /// `pages`' (see `HTTPErrorPages`). Left alone when larger than anything evhttp writes
    /// of its own.
    func lookAtOutput(_ pages: HTTPErrorPages?) {
        guard rewriteDue else { return }
        rewriteDue = false
        guard let bev, let output = bufferevent_get_output(bev) else { return }
        let length = evbuffer_get_length(output)
        guard length > outputBefore, length <= 4096 else { return }
        // The buffer's start is found frozen here at times (seen for a chunk over the limit
        // after a 100 Continue; cause not traced in libevent), which refuses copying out and
        // draining: thawed for this, then frozen again.
        let copy = { EvbufferBytes.copy(output, count: length) }
        var written = copy()
        let wasFrozen = written.count != length
        if wasFrozen {
            evbuffer_unfreeze(output, 1)
            written = copy()
        }
        defer { if wasFrozen { evbuffer_freeze(output, 1) } }
        guard written.count == length else { return }
        let evhttps = Array(written[outputBefore...])
        if HTTPErrorPages.isContinue(evhttps) {
            writingOwn = true
            evbuffer_drain(output, length)
            _ = written[..<outputBefore].withUnsafeBytes { evbuffer_add(output, $0.baseAddress, $0.count) }
            writingOwn = false
            return holdContinue(evhttps)
        }
        guard let status = HTTPErrorPages.evhttpPageStatus(evhttps) else { return }
        let refusal: HTTPRequestRefusal = switch status {
        case 413: .bodyTooLarge
        case 417: .expectationFailed
        // A head evhttp refused for a value it could not read (`Content-Length: 3, 3`, a
        // Transfer-Encoding it does not know) is counted by the rule it broke.
        default: recorder.head.flatMap { if case .refused(let broken) = HTTPRequestHead.check($0) { broken } else { nil } }
            ?? (recorder.head == nil && recorder.bytes.count > (server?.limits.maxHeaderBytes ?? 0) ? .headTooLarge : .malformed)
        }
        server?.countRefusal(refusal)
        guard let pages, let replacement = pages.replacing(evhttps) else { return }
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
        if !answeredBeforeBody { server?.countDeadlineClose() }
        shutdown(fd, Int32(SHUT_RDWR))
    }

    /// evhttp is freeing the connection (its close callback, or the server stopping):
    /// a request still on it goes with it, and nothing may touch the bufferevent after.
    func closed() {
        if let outputWatch, let bev, let output = bufferevent_get_output(bev) { evbuffer_remove_cb_entry(output, outputWatch) }
        outputWatch = nil
        if let inputWatch, let bev, let input = bufferevent_get_input(bev) { evbuffer_remove_cb_entry(input, inputWatch) }
        inputWatch = nil
        continueHeld = nil
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
        gate.leave(from: peerAddress)
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
    guard let buffer, let info, let context else { return }
    let connection = Unmanaged<HTTPServerConnection>.fromOpaque(context).takeUnretainedValue()
    withExtendedLifetime(connection) { connection.outputAdded(buffer, info.pointee) }
}

/// The watch on a connection's input buffer (`HTTPServerConnection.inputAdded`): run as
/// bytes are read, before evhttp parses them.
func httpInputCallback(_ buffer: OpaquePointer?, _ info: UnsafePointer<evbuffer_cb_info>?, _ context: UnsafeMutableRawPointer?) {
    guard let buffer, let info, let context else { return }
    let connection = Unmanaged<HTTPServerConnection>.fromOpaque(context).takeUnretainedValue()
    withExtendedLifetime(connection) { connection.inputAdded(buffer, info.pointee) }
}

/// evhttp's close callback, run by evhttp_connection_free before it frees the requests.
func httpConnectionCloseCallback(_ evcon: OpaquePointer?, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let connection = Unmanaged<HTTPServerConnection>.fromOpaque(context).takeUnretainedValue()
    withExtendedLifetime(connection) { connection.closed() }
}
