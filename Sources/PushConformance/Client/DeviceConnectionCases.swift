import PushClock
import PushWire

/// The device's frames and its connections: HELLO, headers, fields, correlation ids,
/// keepalive, in-flight limit (sections 2, 3, 5).
enum DeviceConnectionCases {
    static let all: [ClientCase] = [helloFirst, helloCredential, helloSize, headerBits, fieldOrder, fieldLengths,
                                    correlationUnique, correlationMatch, pingPong, keepalivePing, inflight]

    static let helloFirst = ClientCase("dev.hello.first", clause: "5.1-1",
                                       "HELLO is the first frame on each connection, and nothing follows it before HELLO_OK") { h throws(CaseStop) in
        h.gateway.helloDelayMs = 400
        try h.giveToken()
        try h.startAndConnect()
        try h.settle()
        _ = try FrameRules.helloFirst(h, service: .store, heldMs: 0)
        return try FrameRules.helloFirst(h, service: .gateway, heldMs: 400)
    }

    static let helloCredential = ClientCase("dev.hello.credential", clause: "4.2-2",
                                            "the device's HELLO to the gateway has role 1 and its registration as the credential") { h throws(CaseStop) in
        try h.startClient()
        try h.wait("no HELLO reached the gateway") { !h.log.messages(.hello, to: .gateway).isEmpty }
        guard case .hello(let hello)? = h.log.messages(.hello, to: .gateway)[0].message else {
            throw .fail("the HELLO to the gateway does not decode")
        }
        guard hello.role == .device else { throw .fail("the HELLO names role \(hello.role), not device (1)") }
        guard hello.credential == h.registration else {
            throw .fail(hello.credential == nil ? "the HELLO carries no credential" : "the HELLO's credential is not the registration in {credential}")
        }
        return "role device, the registration's bytes"
    }

    static let helloSize = ClientCase("dev.hello.size", clause: "5.1-7",
                                      "every HELLO fits in 1024 bytes, header included") { h throws(CaseStop) in
        try h.giveToken()
        try h.startClient()
        try h.wait("no HELLO reached both servers") {
            !h.log.messages(.hello, to: .gateway).isEmpty && !h.log.messages(.hello, to: .store).isEmpty
                || !h.log.unframed(.gateway).isEmpty || !h.log.unframed(.store).isEmpty
        }
        for service in [HarnessService.gateway, .store] {
            if let error = h.log.unframed(service).first { throw .fail("the \(service) refused the device's first bytes: \(error)") }
            for hello in h.log.messages(.hello, to: service) where hello.header.frameLength > 1_024 {
                throw .fail("a HELLO to the \(service) takes \(hello.header.frameLength) bytes")
            }
        }
        return "HELLOs of \(h.log.messages(.hello, to: .gateway)[0].header.frameLength) and \(h.log.messages(.hello, to: .store)[0].header.frameLength) bytes"
    }

    /// A PUSH shown and acknowledged: a run of every frame a device sends.
    static func ordinaryFlow(_ h: ClientHarness) throws(CaseStop) {
        try h.startLoggedIn()
        let (id, _) = h.commitPayload()
        try h.pushAndWaitShown(id)
        try h.wait("no ACK of \(id.hex) reached the store") { !h.acks(id).isEmpty }
        h.gateway.send(.ping, correlation: h.gateway.correlation())
        try h.pause(300)
    }

    static let headerBits = ClientCase("dev.frame.header", clause: "2-5",
                                       "the flags byte (2-5) and the reserved u16 (2-6) are 0 in every frame the device sends") { h throws(CaseStop) in
        try ordinaryFlow(h)
        return try FrameRules.headers(h)
    }

    static let fieldOrder = ClientCase("dev.field.order", clause: "3.4-1",
                                       "each field appears at most once per body, in ascending tag order") { h throws(CaseStop) in
        try ordinaryFlow(h)
        return try FrameRules.fieldOrder(h)
    }

    static let fieldLengths = ClientCase("dev.field.varint", clause: "3.1-4",
                                         "every field length is written in the fewest bytes") { h throws(CaseStop) in
        try ordinaryFlow(h)
        return try FrameRules.fieldLengths(h)
    }

    static let correlationUnique = ClientCase("dev.correlation.unique", clause: "5.3-3",
                                              "no correlation id is used again while its request is outstanding") { h throws(CaseStop) in
        let ids = (0..<5).map { _ in h.commitPayload().id }
        h.store.intercept = { request in
            if case .fetch = request.message { return .later(ms: 300, .faithful) }
            return .faithful
        }
        try h.giveToken()
        try h.startAndConnect()
        try h.wait("the device did not show the 5 payloads the store listed") { ids.allSatisfy { !h.shown($0).isEmpty } }
        if let reuse = Outstanding.reusedCorrelation(h.log, service: .store) { throw .fail(reuse) }
        return "\(h.log.received(from: .store).count) frames to the store, no id reused while outstanding"
    }

    static let correlationMatch = ClientCase("dev.correlation.match", clause: "5.3-2",
                                             "replies that come out of order are matched to their requests by correlation id") { h throws(CaseStop) in
        try h.startLoggedIn()
        let first = h.commitPayload(), second = h.commitPayload()
        var held = false
        h.store.intercept = { request in
            guard case .fetch(let fetch) = request.message, fetch.id == first.id, !held else { return .faithful }
            held = true
            return .later(ms: 500, .faithful)
        }
        h.gateway.push(first.id)
        try h.wait("the device did not FETCH \(first.id.hex)") { !h.fetches(first.id).isEmpty }
        h.gateway.push(second.id)
        try h.wait("the device did not show both payloads") { !h.shown(first.id).isEmpty && !h.shown(second.id).isEmpty }
        for (id, content) in [first, second] where h.shown(id)[0].content != .payload(content) {
            throw .fail("\(id.hex) was shown with \(h.shown(id)[0].content.summary), not its own content")
        }
        return "second reply first; each id shown with its own content"
    }

    static let pingPong = ClientCase("dev.ping.pong", clause: "4.3-1",
                                     "a PING from the gateway is answered PONG with its correlation id") { h throws(CaseStop) in
        try h.startLoggedIn()
        let correlation: UInt32 = 0x51
        h.gateway.send(.ping, correlation: correlation)
        try h.wait("no PONG with correlation id \(correlation)", timeoutMs: 1_000) {
            h.log.messages(.pong, to: .gateway).contains { $0.header.correlation == correlation }
        }
        return "PONG \(correlation)"
    }

    static let keepalivePing = ClientCase("dev.keepalive.ping", clause: "5.4-1",
                                          "with keepalive_ms 1000 granted, the device sends a frame at least every second while idle",
                                          limits: { $0.gateway.keepaliveMs = 1_000 }) { h throws(CaseStop) in
        try h.startLoggedIn()
        let start = Clocks.monotonicMilliseconds()
        try h.pause(3_500)
        let connection = h.gatewayConnectionNumber
        if h.log.closedAt(.gateway, connection: connection) != nil {
            throw .fail("the device's gateway connection ended while it was idle (kept alive, it would have stayed)")
        }
        let times = [start] + h.log.received(from: .gateway).filter { $0.connection == connection && $0.atMs > start }.map(\.atMs)
            + [Clocks.monotonicMilliseconds()]
        let longest = zip(times, times.dropFirst()).map { $1 - $0 }.max() ?? 0
        // A PING a little late is a loaded machine; none for twice the interval is no keepalive.
        guard longest < 2_000 else { throw .fail("the device sent nothing to the gateway for \(longest) ms with keepalive_ms 1000") }
        return "longest silence \(longest) ms"
    }

    static let inflight = ClientCase("dev.inflight", clause: "5.3-1",
                                     "the device keeps at most the granted max_inflight requests outstanding",
                                     limits: { $0.store.maxInflight = 2 }) { h throws(CaseStop) in
        let ids = (0..<8).map { _ in h.commitPayload().id }
        h.store.intercept = { request in
            if case .fetch = request.message { return .later(ms: 150, .faithful) }
            return .faithful
        }
        try h.giveToken()
        try h.startAndConnect()
        try h.wait("the device did not show the 8 payloads the store listed", timeoutMs: 8_000) { ids.allSatisfy { !h.shown($0).isEmpty } }
        let most = Outstanding.most(h.log, service: .store)
        guard most <= 2 else { throw .fail("the device had \(most) requests outstanding on the store connection with max_inflight 2") }
        return "at most \(most) outstanding"
    }
}

