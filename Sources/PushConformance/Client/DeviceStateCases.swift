#if canImport(Glibc)
import Glibc
#endif
import PushWire

/// The device's HELLOs and files (4.1-2, 4.2-3, 7.5-3, 7.5-5), how it ends a connection
/// over a fault (5.6-1, 5.6-2), and a registration the gateway revokes (7.4-7).
enum DeviceStateCases {
    static let all: [ClientCase] = [role, storeCredential, fatalGoaway, goawayLastCorrelation, requestError, notServed, credentialForm, fileModes, revoked]

    static let role = ClientCase("dev.hello.role", clause: "4.1-2",
                                 "every HELLO the device sends, to either server, names role 1 (device)") { h throws(CaseStop) in
        try DeviceConnectionCases.ordinaryFlow(h)
        for frame in h.log.received() where frame.header.type == .hello {
            guard case .hello(let hello)? = frame.message, hello.role == .device else {
                throw .fail("a HELLO to the \(frame.service) does not name role device")
            }
        }
        return "\(h.log.received().filter { $0.header.type == .hello }.count) HELLOs, role device"
    }

    static let storeCredential = ClientCase("dev.hello.store-credential", clause: "4.2-3",
                                            "the device's HELLO to the store carries no credential") { h throws(CaseStop) in
        try h.startLoggedIn()
        for frame in h.log.messages(.hello, to: .store) {
            if case .hello(let hello)? = frame.message, hello.credential != nil {
                throw .fail("the HELLO to the store carries a credential of \(hello.credential?.count ?? 0) bytes")
            }
        }
        return "no credential"
    }

    static let fatalGoaway = ClientCase("dev.frame.goaway-status", clause: "5.6-1",
                                        "on a fatal frame the device sends GOAWAY with its status before it closes") { h throws(CaseStop) in
        try h.startLoggedIn()
        let goaway = try h.goawayAfterFatalFrame(on: .gateway) { h.gateway.sendRaw($0) }
        guard goaway.header.status == .unsupportedVersion else { throw .fail("the GOAWAY carries \(goaway.header.status), not UNSUPPORTED_VERSION") }
        return "GOAWAY UNSUPPORTED_VERSION, then closed"
    }

    static let goawayLastCorrelation = ClientCase("dev.goaway.last-correlation", clause: "4.4-5",
                                                  "the device's GOAWAY on a fatal frame names the last PUSH it processed in last_correlation") { h throws(CaseStop) in
        try h.startLoggedIn()
        let (id, _) = h.commitPayload()
        guard let correlation = h.gateway.push(id) else { throw .fail("the device is not connected to the gateway") }
        try h.wait("no DELIVERY_ACK for the PUSH (correlation \(correlation))") { h.deliveryAcks.contains { $0.correlation == correlation } }
        guard case .goaway(let goaway)? = try h.goawayAfterFatalFrame(on: .gateway, send: { h.gateway.sendRaw($0) }).message else {
            throw .fail("the device's GOAWAY does not decode")
        }
        guard goaway.lastCorrelation == correlation else {
            throw .fail("the GOAWAY's last_correlation is \(goaway.lastCorrelation), not \(correlation), the PUSH the device acknowledged")
        }
        return "last_correlation \(correlation)"
    }

    static let requestError = ClientCase("dev.request-error", clause: "5.6-2",
                                         "a PUSH with an empty id is answered ERROR BAD_REQUEST with its correlation id, and the connection stays") { h throws(CaseStop) in
        try h.startLoggedIn()
        let correlation = h.gateway.correlation()
        h.gateway.sendRaw(RawFrame.frame(.push, correlation: correlation, body: RawFrame.field(.id, [])))
        try h.wait("no ERROR with correlation id \(correlation) came back") {
            h.log.messages(.error, to: .gateway).contains { $0.header.correlation == correlation && $0.header.status == .badRequest }
        }
        let (id, _) = h.commitPayload()
        try h.pushAndWaitShown(id)
        guard h.log.closedAt(.gateway, connection: h.gatewayConnectionNumber) == nil else { throw .fail("the device closed the connection") }
        return "ERROR BAD_REQUEST; the next PUSH shown on the same connection"
    }

    static let notServed = ClientCase("dev.request.not-served", clause: "4.1-4",
                                      "a FETCH sent to the device, which serves only PING and PUSH, is answered ERROR BAD_REQUEST and the connection stays") { h throws(CaseStop) in
        try h.startLoggedIn()
        let correlation = h.gateway.correlation()
        h.gateway.send(.fetch(Fetch(id: PayloadID.random(), token: nil)), correlation: correlation)
        try h.expectError(.badRequest, answering: correlation, on: .gateway)
        let (id, _) = h.commitPayload()
        try h.pushAndWaitShown(id)
        guard h.log.closedAt(.gateway, connection: h.gatewayConnectionNumber) == nil else { throw .fail("the device closed the connection") }
        return "ERROR BAD_REQUEST; the next PUSH shown on the same connection"
    }

    static let credentialForm = ClientCase("dev.credential.file-form", clause: "7.5-3",
                                           "a registration file in uppercase hex with whitespace in it is read as the same credential") { h throws(CaseStop) in
        let hex = h.registration.hexString.uppercased()
        let spaced = stride(from: 0, to: hex.count, by: 64).map { start in
            String(hex.dropFirst(start).prefix(64))
        }.joined(separator: "\n  ")
        try h.writeFile("registration", "  " + spaced + "\n\n")
        try h.startLoggedIn()
        return "connected with the registration"
    }

    static let fileModes = ClientCase("dev.state.file-modes", clause: "7.5-5",
                                      "the files the device writes in its state directory are readable by their owner only") { h throws(CaseStop) in
        try DeviceConnectionCases.ordinaryFlow(h)
        h.stopClient()
        let names = h.stateFiles()
        for name in names {
            var info = stat()
            guard lstat(h.stateDirectory + "/" + name, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
            guard info.st_mode & 0o077 == 0 else {
                throw .fail("\(name) in the state directory has mode \(String(info.st_mode & 0o777, radix: 8))")
            }
        }
        return "\(names.count) files, owner only"
    }

    static let revoked = ClientCase("dev.goaway.revoked", clause: "7.4-7",
                                    "after GOAWAY REVOKED the device does not connect to the gateway again") { h throws(CaseStop) in
        try h.startLoggedIn()
        let before = h.log.connectionCount(.gateway)
        h.gateway.sendRaw(RawFrame.frame(.goaway, correlation: 0, status: .revoked,
                                         body: RawFrame.field(.lastCorrelation, RawFrame.bigEndian(UInt32(0)))))
        if let device = h.gateway.device { device.connection.closeAfterFlush(timeout: .seconds(1)) }
        h.gateway.refuseHello = .badCredentials
        // Stopping for good is one way to keep the rule.
        try h.pause(3_000, clientMayExit: true)
        let attempts = h.log.connectionCount(.gateway) - before
        guard attempts == 0 else { throw .fail("the device connected to the gateway \(attempts) more times with its revoked registration") }
        return "no new connection in 3 s"
    }
}
