import PushClock
import PushWire

/// Steps both kinds of client cases share.
extension ClientHarness {
    /// The connection a case judges on `service`.
    func judgedConnection(_ service: HarnessService) -> Int {
        service == .gateway ? gatewayConnectionNumber : storeConnectionNumber
    }

    /// Sends a header of version 2 (fatal UNSUPPORTED_VERSION, 2-3) on the judged connection
    /// to `service` through `send`, waits for the client to close it, and returns the GOAWAY
    /// the client sent first, which 5.6-1 asks for.
    func goawayAfterFatalFrame(on service: HarnessService, send: ([UInt8]) -> Void) throws(CaseStop) -> WireLog.ReceivedFrame {
        let connection = judgedConnection(service)
        let type = service == .gateway ? MessageType.push : .storeOK
        send(RawFrame.header(type: type.rawValue, correlation: 5, length: 0, version: 2))
        try wait("the client kept the connection open after a frame of version 2") { log.closedAt(service, connection: connection) != nil }
        guard let goaway = log.messages(.goaway, to: service).first(where: { $0.connection == connection }) else {
            throw .fail("the client closed without GOAWAY UNSUPPORTED_VERSION")
        }
        return goaway
    }

    /// Waits for the client's ERROR answering `correlation` on `service` and checks its status.
    func expectError(_ status: Status, answering correlation: UInt32, on service: HarnessService) throws(CaseStop) {
        try wait("no ERROR with correlation id \(correlation) came back") {
            log.messages(.error, to: service).contains { $0.header.correlation == correlation }
        }
        let error = log.messages(.error, to: service).first { $0.header.correlation == correlation }
        guard error?.header.status == status else { throw .fail("the ERROR carries \(error.map { "\($0.header.status)" } ?? "?"), not \(status)") }
    }
}

/// The one SEND a case answers its own way (`ClientHarness.interceptNextSend`).
final class InterceptedSend {
    fileprivate(set) var request: HarnessRequest?
    /// When it reached the store.
    fileprivate(set) var atMs: Int64 = 0
}

extension ClientHarness {
    /// Has the store answer the next SEND as `answer` says, and every other request faithfully.
    @discardableResult
    func interceptNextSend(_ answer: @escaping (HarnessRequest) -> HarnessAnswer) -> InterceptedSend {
        let intercepted = InterceptedSend()
        store.intercept = { request in
            guard case .send = request.message, intercepted.request == nil else { return .faithful }
            intercepted.request = request
            intercepted.atMs = Clocks.monotonicMilliseconds()
            return answer(request)
        }
        return intercepted
    }
}
