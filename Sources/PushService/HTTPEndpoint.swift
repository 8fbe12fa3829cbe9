import PushEventLoop
import PushWire

/// A small HTTP/1.1 server for GET endpoints (metrics, health) on an event loop, over
/// connections in raw byte mode. One request per connection, answered with
/// `Connection: close`. Loop-confined.
///
/// `respond(path)` answers a GET (the path without its query); nil is 404. Other methods
/// get 405, anything that is not an HTTP/1.x request head 400, a head over
/// `maxHeadBytes` 431, and a connection that has not sent a whole head within
/// `idleTimeout` of connecting is closed.
///
/// While listening, the endpoint is kept alive by its listener; `stop()` (or the loop
/// shutting down) ends that.
public final class HTTPEndpoint {
    public typealias Responder = (_ path: String) -> (status: Int, contentType: String, body: [UInt8])?

    public let loop: EventLoop
    public let maxHeadBytes: Int
    public let idleTimeout: Duration
    /// The bound port (the real one when 0 was asked for); 0 once stopped.
    public var port: Int { listener?.port ?? 0 }
    private var listener: Listener?
    private let respond: Responder
    private var exchanges: [ObjectIdentifier: HTTPExchange] = [:]

    /// Binds `host` (numeric) and `port` (0: any free port) and starts answering.
    public init(loop: EventLoop, host: String, port: Int, maxHeadBytes: Int = 8 * 1024,
                idleTimeout: Duration = .seconds(5), respond: @escaping Responder) throws(EventLoopError) {
        self.loop = loop
        self.maxHeadBytes = maxHeadBytes
        self.idleTimeout = idleTimeout
        self.respond = respond
        listener = try Listener(loop: loop, host: host, port: port, backlog: 64) { connection in
            self.accept(connection)
        }
    }

    /// Stops listening and closes every open connection. Idempotent.
    public func stop() {
        guard let listener else { return }
        self.listener = nil
        listener.close()
        for exchange in Array(exchanges.values) { exchange.connection.close() }
    }

    /// Connections currently open.
    public var connectionCount: Int { exchanges.count }

    private func accept(_ connection: Connection) {
        connection.isFramed = false
        let exchange = HTTPExchange(endpoint: self, connection: connection)
        exchanges[ObjectIdentifier(exchange)] = exchange
        connection.handler = exchange
        exchange.deadline = loop.schedule(after: idleTimeout) { [weak exchange] in
            exchange?.connection.close()
        }
    }

    fileprivate func answer(_ head: HTTPRequestHead) -> HTTPResponse {
        guard head.method == "GET" else { return .plain(405, "method not allowed", extraHeaders: [("Allow", "GET")]) }
        guard let found = respond(head.path) else { return .plain(404, "not found") }
        return HTTPResponse(status: found.status, contentType: found.contentType, body: found.body)
    }

    fileprivate func closed(_ exchange: HTTPExchange) {
        exchanges[ObjectIdentifier(exchange)] = nil
    }
}

/// One connection's request: its head is gathered until the empty line, then answered.
private final class HTTPExchange: ConnectionHandler {
    let endpoint: HTTPEndpoint
    let connection: Connection
    var deadline: LoopTimer?
    private var head: [UInt8] = []
    private var answered = false

    init(endpoint: HTTPEndpoint, connection: Connection) {
        self.endpoint = endpoint
        self.connection = connection
    }

    func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) {
        // Never called: the connection is not framed.
    }

    func onBytes(_ connection: Connection, bytes: UnsafeRawBufferPointer) {
        guard !answered else { return }
        let searchFrom = max(0, head.count - 2)
        let room = endpoint.maxHeadBytes - head.count
        head.append(contentsOf: bytes.prefix(room))
        if let end = HTTPRequestHead.end(in: head, searchingFrom: searchFrom) {
            do throws(HTTPRequestHead.Failure) {
                finish(endpoint.answer(try HTTPRequestHead.parse(head[..<end])))
            } catch {
                finish(.plain(400, "bad request"))
            }
        } else if bytes.count > room {
            finish(.plain(431, "request head over \(endpoint.maxHeadBytes) bytes"))
        }
    }

    private func finish(_ response: HTTPResponse) {
        answered = true
        head = []
        // From here closeAfterFlush's own deadline applies: a slow reader that makes
        // progress gets the whole response.
        deadline?.cancel()
        deadline = nil
        connection.write(response.encoded())
        connection.closeAfterFlush(timeout: endpoint.idleTimeout)
    }

    func onBackpressure(_ connection: Connection) -> BackpressureAction {
        // A response is written whole, once; it may be larger than the default cap.
        .keepOpen
    }

    func onClose(_ connection: Connection, reason: CloseReason) {
        deadline?.cancel()
        deadline = nil
        endpoint.closed(self)
    }
}
