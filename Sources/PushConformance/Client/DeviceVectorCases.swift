import PushWire

/// The golden vectors a device can receive, sent by the harness's gateway on a live
/// connection (SPEC.md section 9), with the outcome each documents:
///
/// - request_error S (a PUSH, a PING, a request a device does not serve, an unknown type):
///   ERROR S echoing the frame's correlation id, nothing acted on, the connection kept
///   ([5.6-2], [3.4-7]);
/// - fatal S (a header no frame may have): the device closes the connection ([5.6-1]);
/// - a PUSH that decodes (padded lengths, fields in another order): DELIVERY_ACK with its
///   correlation id ([3.1-4], [3.4-1] for receivers, [4.14-2]).
///
/// Vectors that need another max_frame than the default, HELLOs (their meaning depends on
/// being the first frame) and replies (rejected ones show only as an absence) are left to
/// the codec tests and the named cases.
enum DeviceVectorCases {
    static var all: [ClientCase] {
        VectorSource.load(explicit: nil).vectors.compactMap(clientCase)
    }

    static func clientCase(_ vector: TestVector) -> ClientCase? {
        guard vector.maxFrame == FrameLimits.defaultMaxFrame, vector.bytes.count >= FrameHeader.size,
              let correlation = RawFrame.correlation(of: vector.bytes) else { return nil }
        let type = MessageType(rawValue: vector.bytes[2])
        guard type != .hello else { return nil }
        let clause = vector.clauses.first { SpecClauses.bindsClient($0, .device) } ?? "9-1"
        let id = "dev.vector.\(vector.name)"
        switch vector.expectation {
        case .requestError(let status) where type?.isRequest ?? true:
            return ClientCase(id, clause: clause, "vector \(vector.name): ERROR \(status), connection kept") { h throws(CaseStop) in
                try h.startLoggedIn()
                h.gateway.sendRaw(vector.bytes)
                try h.wait("no ERROR with correlation id \(correlation) came back", timeoutMs: 1_500) {
                    h.log.messages(.error, to: .gateway).contains { $0.header.correlation == correlation }
                }
                let error = h.log.messages(.error, to: .gateway).first { $0.header.correlation == correlation }
                guard error?.header.status == status else { throw .fail("the ERROR carries \(error.map { "\($0.header.status)" } ?? "?"), not \(status)") }
                try h.pause(300)
                guard h.log.closedAt(.gateway, connection: 1) == nil else { throw .fail("the device closed the connection after a request error") }
                guard !h.deliveryAcks.contains(where: { $0.correlation == correlation }) else { throw .fail("the device acknowledged the refused frame") }
                return "ERROR \(status)"
            }
        case .fatal(let status):
            return ClientCase(id, clause: clause, "vector \(vector.name): fatal \(status), the device closes",
                              body: DeviceRecoveryCases.fatal(vector.bytes, "a frame fatal with \(status)"))
        case .message(.push, _, _, _):
            return ClientCase(id, clause: clause, "vector \(vector.name): a PUSH that decodes is acknowledged") { h throws(CaseStop) in
                try h.startLoggedIn()
                h.gateway.sendRaw(vector.bytes)
                try h.wait("no DELIVERY_ACK with correlation id \(correlation)", timeoutMs: 1_500) {
                    h.deliveryAcks.contains { $0.correlation == correlation }
                }
                return "DELIVERY_ACK"
            }
        default:
            return nil
        }
    }
}
