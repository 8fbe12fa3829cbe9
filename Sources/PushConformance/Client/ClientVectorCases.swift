import PushWire

/// The golden vectors a client can receive (SPEC.md section 9), sent on a live connection
/// (a device's to the gateway, a provider's to the store), with the outcome each documents:
///
/// - request_error S (a PING, a request the client does not serve, an unknown type, and for
///   a device a PUSH): ERROR S echoing the frame's correlation id, nothing acted on, the
///   connection kept ([5.6-2], [3.4-7]);
/// - fatal S (a header no frame may have): the client closes the connection, and a GOAWAY it
///   sends first carries S, the first check of 2-11 that fails ([5.6-1]);
/// - for a device, a PUSH that decodes (padded lengths, fields in another order):
///   DELIVERY_ACK with its correlation id and the pushed id ([3.1-4], [3.4-1] for
///   receivers, [4.14-2]).
///
/// Vectors that need another max_frame than the default, HELLOs (their meaning depends on
/// being the first frame) and replies (rejected ones show only as an absence) are left to
/// the codec tests and the named cases.
enum ClientVectorCases {
    static func all(_ kind: ClientKind) -> [ClientCase] {
        VectorSource.load(explicit: nil).vectors.compactMap { clientCase($0, kind) }
    }

    /// The client connected and quiet, and the connection the vector goes to.
    static func connect(_ h: ClientHarness, _ kind: ClientKind) throws(CaseStop) -> (service: HarnessService, send: ([UInt8]) -> Void) {
        switch kind {
        case .device:
            try h.startLoggedIn()
            return (.gateway, { [unowned gateway = h.gateway] in gateway.sendRaw($0) })
        case .provider:
            let peer = try ProviderCases.connected(h)
            return (.store, { [unowned server = h.storeServer] in server.sendRaw($0, to: peer) })
        }
    }

    static func clientCase(_ vector: TestVector, _ kind: ClientKind) -> ClientCase? {
        guard vector.maxFrame == FrameLimits.defaultMaxFrame, vector.bytes.count >= FrameHeader.size,
              let correlation = RawFrame.correlation(of: vector.bytes) else { return nil }
        let type = MessageType(rawValue: vector.bytes[2])
        guard type != .hello else { return nil }
        let clause = vector.clauses.first { SpecClauses.bindsClient($0, kind) } ?? "9-1"
        let id = "\(kind == .device ? "dev" : "prov").vector.\(vector.name)"
        switch vector.expectation {
        case .requestError(let status) where (type?.isRequest ?? true) && (kind == .device || type != .push):
            return ClientCase(id, clause: clause, "vector \(vector.name): ERROR \(status), connection kept", kind: kind) { h throws(CaseStop) in
                let (service, send) = try connect(h, kind)
                send(vector.bytes)
                try h.expectError(status, answering: correlation, on: service)
                try h.pause(300)
                guard h.log.closedAt(service, connection: h.judgedConnection(service)) == nil else { throw .fail("the client closed the connection after a request error") }
                guard !h.deliveryAcks.contains(where: { $0.correlation == correlation }) else { throw .fail("the device acknowledged the refused frame") }
                return "ERROR \(status)"
            }
        case .fatal(let status):
            return ClientCase(id, clause: clause, "vector \(vector.name): fatal \(status), the client closes", kind: kind) { h throws(CaseStop) in
                let (service, send) = try connect(h, kind)
                send(vector.bytes)
                let connection = h.judgedConnection(service)
                try h.wait("the client kept the connection open after a frame fatal with \(status)") {
                    h.log.closedAt(service, connection: connection) != nil
                }
                // 5.6-1 and 2-11: a GOAWAY before the close names the first check that failed.
                let goaway = h.log.messages(.goaway, to: service).first { $0.connection == connection }
                if let goaway, goaway.header.status != status { throw .fail("the GOAWAY carries \(goaway.header.status), not \(status)") }
                return goaway == nil ? "closed" : "GOAWAY \(status), closed"
            }
        case .message(.push, _, _, let fields) where kind == .device:
            let pushed = fields.first { $0.0 == "id" }?.1 ?? []
            return ClientCase(id, clause: clause, "vector \(vector.name): a PUSH that decodes is acknowledged") { h throws(CaseStop) in
                try h.startLoggedIn()
                h.gateway.sendRaw(vector.bytes)
                try h.wait("no DELIVERY_ACK with correlation id \(correlation)") {
                    h.deliveryAcks.contains { $0.correlation == correlation }
                }
                // 4.14-2: the acknowledgement names the id the PUSH carried.
                guard let ack = h.deliveryAcks.first(where: { $0.correlation == correlation }), ack.id == pushed else {
                    throw .fail("the DELIVERY_ACK does not carry the pushed id \(pushed.hexString)")
                }
                return "DELIVERY_ACK"
            }
        default:
            return nil
        }
    }
}
