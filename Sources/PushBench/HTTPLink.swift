import PushClock
import PushEventLoop
import PushWire

/// Who hears from an HTTP link: a scenario's workload.
protocol HTTPLinkOwner: AnyObject {
    /// The response to the request sent with `token`, read whole at `end`.
    func answered(_ link: HTTPLink, token: UInt32, outcome: HTTPResponseReader.Outcome, end: UInt64)
    /// The link is unusable (closed by the server, or a response it cannot read).
    func linkLost(_ link: HTTPLink, reason: String)
}

/// One keep-alive HTTP/1.1 connection of the bench, in raw-byte mode: it writes one
/// pre-encoded request, waits for the whole response, and only then may send the next
/// (the server does not pipeline). Loop-confined.
final class HTTPLink: ConnectionHandler {
    enum State { case idle, connecting, ready, closed }

    /// The link's position in its group.
    let index: Int
    private(set) var state = State.idle
    /// Why the link failed or closed, for the report.
    private(set) var failure: String?
    /// Called once when the connect succeeds or fails (setup only).
    var onSetup: ((HTTPLink) -> Void)?
    weak var owner: HTTPLinkOwner?

    private let request: [UInt8]
    private var connection: Connection?
    private var opening: Connection?
    private var reader = HTTPResponseReader()
    private var busy = false
    private var token: UInt32 = 0
    private var closingOnPurpose = false

    /// `request`: the whole request, head and body, sent as is for every operation.
    init(index: Int, request: [UInt8]) {
        self.index = index
        self.request = request
    }

    var isReady: Bool { state == .ready }
    var hasRoom: Bool { state == .ready && !busy }

    func open(loop: EventLoop, to endpoint: HostPort) {
        guard state == .idle else { return }
        state = .connecting
        opening = Connection.connect(loop: loop, host: endpoint.host, port: endpoint.port) { [self] result in
            opening = nil
            switch result {
            case .success(let connection):
                connection.isFramed = false
                connection.handler = self
                self.connection = connection
                state = .ready
            case .failure(let error):
                state = .closed
                failure = failure ?? "connect to http://\(endpoint): \(error)"
            }
            onSetup?(self)
            onSetup = nil
        }
    }

    /// Writes the request for operation `token`; false when a request is outstanding.
    func send(token: UInt32) -> Bool {
        guard !busy, state == .ready, let connection else { return false }
        busy = true
        self.token = token
        return connection.write(request)
    }

    /// Closes without telling the owner (the end of a run). Idempotent.
    func close() {
        closingOnPurpose = true
        opening?.close()
        opening = nil
        connection?.close()
        connection = nil
        state = .closed
        owner = nil
        onSetup = nil
    }

    // MARK: ConnectionHandler

    func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) {
        // Never called: the connection is not framed.
    }

    func onBytes(_ connection: Connection, bytes: UnsafeRawBufferPointer) {
        let end = Clocks.monotonicNanoseconds()
        reader.append(bytes)
        while state == .ready {
            let outcome: HTTPResponseReader.Outcome?
            do {
                outcome = try reader.next()
            } catch {
                return lose("unreadable response from the store: \(error.reason)")
            }
            guard let outcome else { return }
            guard busy else { return lose("a response with no request outstanding") }
            busy = false
            // The owner may send the next request on this link from here.
            owner?.answered(self, token: token, outcome: outcome, end: end)
        }
    }

    func onBackpressure(_ connection: Connection) -> BackpressureAction {
        // One request at a time: output never builds up beyond one request.
        .keepOpen
    }

    func onClose(_ connection: Connection, reason: CloseReason) {
        self.connection = nil
        state = .closed
        guard !closingOnPurpose else { return }
        let pending = reader.pendingBytes > 0 ? " in the middle of a response" : busy ? " with a request outstanding" : ""
        report("the store closed the http connection\(pending) (\(reason))")
    }

    private func lose(_ reason: String) {
        closingOnPurpose = true
        connection?.close()
        connection = nil
        state = .closed
        report(reason)
    }

    private func report(_ reason: String) {
        failure = failure ?? reason
        let owner = self.owner
        self.owner = nil
        owner?.linkLost(self, reason: reason)
    }
}
