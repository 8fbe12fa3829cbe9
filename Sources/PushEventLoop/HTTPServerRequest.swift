import CLibevent
import Glibc

/// One HTTP request as the handler sees it: read whole, headers and body copied out.
/// Loop-confined; answer it on its loop, now or later.
///
/// A request dropped unanswered is answered 500 when the object goes away, so its
/// connection does not stay open for nothing (evhttp does not read from a connection
/// while its request waits for an answer, so it would not notice the client leaving).
public final class HTTPServerRequest {
    public let method: HTTPMethod
    /// The request target's path without query; percent-decoding NOT applied.
    public let path: String
    /// The query after `?`, if any, not decoded.
    public let query: String?
    public let body: [UInt8]
    /// Numeric address of the client ("127.0.0.1", "::1").
    public let peerHost: String
    /// Every request header in arrival order, as evhttp keeps them.
    public let headers: [(name: String, value: String)]
    /// The evhttp request while it is ours to answer; nil once answered, or once evhttp
    /// freed it with its connection.
    private var raw: OpaquePointer?
    private let connection: HTTPServerConnection?
    public private(set) var isAnswered = false

    init(raw: OpaquePointer, connection: HTTPServerConnection?) {
        self.raw = raw
        self.connection = connection
        self.method = HTTPServerRequest.method(evhttp_request_get_command(raw))
        var path = ""
        var query: String?
        if let uri = evhttp_request_get_evhttp_uri(raw) {
            if let text = evhttp_uri_get_path(uri) { path = String(cString: text) }
            if let text = evhttp_uri_get_query(uri) { query = String(cString: text) }
        }
        self.path = path
        self.query = query
        var host = ""
        if let connection = evhttp_request_get_connection(raw) {
            var address: UnsafeMutablePointer<CChar>?
            var port: UInt16 = 0
            evhttp_connection_get_peer(connection, &address, &port)
            if let address { host = String(cString: address) }
        }
        self.peerHost = host
        self.headers = HTTPServerRequest.copyHeaders(evhttp_request_get_input_headers(raw))
        self.body = HTTPServerRequest.copyBody(evhttp_request_get_input_buffer(raw))
    }

    deinit {
        if raw != nil {
            respond(status: 500, headers: [("Content-Type", "application/problem+json"), ("Connection", "close")],
                    body: Array(#"{"status":500,"title":"the request was dropped unanswered"}"#.utf8))
        }
    }

    /// The first header called `name`, compared case-insensitively, as evhttp_find_header
    /// does: a repeated header gives its first value (evhttp does not join them). evhttp
    /// has cut leading spaces and trailing spaces and tabs from the value, and appended
    /// folded continuation lines to it.
    public func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.name.lowercased() == wanted }?.value
    }

    /// Answers once; later calls are ignored. Safe to call after the client has gone away.
    /// While the server drains, the answer carries `Connection: close` and its connection
    /// closes once it is written.
    /// `headers` are added to the response (one with CR or LF in it is dropped: evhttp
    /// refuses it); evhttp sets Content-Length, and Date. Without a Content-Type, evhttp
    /// adds `text/html; charset=ISO-8859-1` to a response with a body.
    public func respond(status: Int, reason: String? = nil, headers: [(String, String)], body: [UInt8]) {
        guard !isAnswered else { return }
        isAnswered = true
        guard let raw else { return }
        self.raw = nil
        if let output = evhttp_request_get_output_headers(raw) {
            for (name, value) in headers { _ = evhttp_add_header(output, name, value) }
            // A draining server closes each connection after its answer (HTTPServer.drain).
            if connection?.server?.isDraining == true, evhttp_find_header(output, "Connection") == nil {
                _ = evhttp_add_header(output, "Connection", "close")
            }
        }
        if !body.isEmpty, let buffer = evhttp_request_get_output_buffer(raw) {
            _ = body.withUnsafeBytes { evbuffer_add(buffer, $0.baseAddress, $0.count) }
        }
        let code = Int32(clamping: (100...999).contains(status) ? status : 500)
        // Without a connection (the client left, evhttp detached the request) this only
        // frees the request.
        // A reason with a line break would let the caller write headers of its own.
        let phrase = reason.map { String($0.filter { $0 != "\r" && $0 != "\n" }) }
        connection?.writingOwn = true
        evhttp_send_reply(raw, code, phrase, nil)
        connection?.writingOwn = false
        connection?.responseHandedOver()
    }

    /// evhttp frees the request with its connection: no call may reach it after this.
    func connectionFreed() {
        raw = nil
    }

    /// Whether evhttp still has the request on a connection (and so will free it with
    /// that connection); a detached request is freed only by answering it.
    var isOnConnection: Bool {
        guard let raw else { return false }
        return evhttp_request_get_connection(raw) != nil
    }

    private static func method(_ command: evhttp_cmd_type) -> HTTPMethod {
        switch command {
        case EVHTTP_REQ_GET: .get
        case EVHTTP_REQ_POST: .post
        case EVHTTP_REQ_DELETE: .delete
        case EVHTTP_REQ_HEAD: .head
        case EVHTTP_REQ_PUT: .put
        case EVHTTP_REQ_PATCH: .patch
        case EVHTTP_REQ_OPTIONS: .options
        default: .other
        }
    }

    private static func copyHeaders(_ list: UnsafeMutablePointer<evkeyvalq>?) -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = []
        var entry = list?.pointee.tqh_first
        while let current = entry {
            if let key = current.pointee.key, let value = current.pointee.value {
                headers.append((String(cString: key), String(cString: value)))
            }
            entry = current.pointee.next.tqe_next
        }
        return headers
    }

    private static func copyBody(_ buffer: OpaquePointer?) -> [UInt8] {
        guard let buffer else { return [] }
        let length = evbuffer_get_length(buffer)
        return EvbufferBytes.copy(buffer, count: length)
    }
}
