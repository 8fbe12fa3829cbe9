/// A request that asked `Expect: 100-continue`, held before its body is read: the server's
/// owner (`HTTPServer.vetContinue`) looks at the head and either lets the client send the
/// body (`proceed`: the client gets `100 Continue`, and the whole request later reaches the
/// handler as any other) or answers it now (`refuse`: the response, then the connection is
/// closed without reading the body). Loop-confined; decide on the server's loop, now or
/// later. One dropped undecided proceeds: the whole request is judged again by the handler.
public final class HTTPContinueRequest {
    public let head: HTTPRequestHead
    /// Numeric address of the client, as `HTTPServerRequest.peerHost`.
    public let peerHost: String
    private weak var connection: HTTPServerConnection?
    private let headNumber: Int
    public private(set) var isDecided = false

    init(head: HTTPRequestHead, peerHost: String, connection: HTTPServerConnection, headNumber: Int) {
        self.head = head
        self.peerHost = peerHost
        self.connection = connection
        self.headNumber = headNumber
    }

    deinit { proceed() }

    /// The client may send its body.
    public func proceed() {
        guard !isDecided else { return }
        isDecided = true
        connection?.sendContinue(headNumber)
    }

    /// Answers the request without its body, then closes the connection. `headers` as for
    /// `HTTPServerRequest.respond` (Content-Length and `Connection: close` are added).
    public func refuse(status: Int, reason: String, headers: [(String, String)], body: [UInt8]) {
        guard !isDecided else { return }
        isDecided = true
        connection?.answerBeforeBody(HTTPServerConnection.response(status: status, reason: reason, headers: headers, body: body),
                                     head: headNumber)
    }
}
