import PushWire

/// Steps and observations the device cases share.
extension ClientHarness {
    /// A payload committed at the store with a random content of `bytes` bytes.
    func commitPayload(bytes: Int = 24) -> (id: PayloadID, content: [UInt8]) {
        let content = (0..<bytes).map { _ in UInt8.random(in: 0x20...0x7e) }
        return (store.commit(content), content)
    }

    /// Starts the device with a token, waits until it is connected and quiet.
    func startLoggedIn() throws(CaseStop) {
        try giveToken()
        try startAndConnect()
        try settle()
    }

    /// PUSHes `id` and waits until the device shows it, one way or the other.
    @discardableResult
    func pushAndWaitShown(_ id: PayloadID) throws(CaseStop) -> ShownNotification {
        guard gateway.push(id) != nil else { throw .fail("the device is not connected to the gateway") }
        try wait("the device did not show \(id.hex) (no `SHOWN \(id.hex) ...` line on stdout)") { !shown(id).isEmpty }
        return shown(id)[0]
    }

    /// The FETCHes for `id` the store received.
    func fetches(_ id: PayloadID) -> [WireLog.ReceivedFrame] {
        log.messages(.fetch, to: .store).filter { if case .fetch(let fetch)? = $0.message { fetch.id == id } else { false } }
    }

    /// The ACKs for `id` the store received.
    func acks(_ id: PayloadID) -> [WireLog.ReceivedFrame] {
        log.messages(.ack, to: .store).filter { if case .ack(let ack)? = $0.message { ack.id == id } else { false } }
    }

    /// The DELIVERY_ACKs the gateway received.
    var deliveryAcks: [(correlation: UInt32, id: [UInt8], atMs: Int64)] {
        log.messages(.deliveryAck, to: .gateway).compactMap { frame in
            guard case .deliveryAck(let ack)? = frame.message else { return nil }
            return (frame.header.correlation, ack.id, frame.atMs)
        }
    }

    /// FAILs if the device printed anything but contract lines (Appendix B.2).
    func requireReadableOutput() throws(CaseStop) {
        if let line = unreadableLines.first {
            throw .fail("the device printed a line that is not `SHOWN <id> PAYLOAD <hex>` or `SHOWN <id> GENERIC`: \(line.prefix(120))")
        }
    }
}

extension ShownNotification.Content {
    var summary: String {
        switch self {
        case .generic: "the generic notification"
        case .payload(let bytes): "content \(bytes.count > 16 ? Array(bytes.prefix(16)).hexString + "..." : bytes.hexString)"
        }
    }
}
