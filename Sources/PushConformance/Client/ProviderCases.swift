import PushClock
import PushSecurity
import PushWire

/// A provider client driven by command lines (Appendix B.3): its HELLOs, its frames, and
/// how it matches answers to commands.
enum ProviderCases {
    static let all: [ClientCase] = [helloCredential, freshCredential, helloFirst, headerBits, fieldOrder, fieldLengths,
                                    correlationMatch, correlationUnique, inflight, pingPong, errorStatus, pushFields]
        + ProviderRecoveryCases.all + ProviderConnectionCases.all + ProviderRequestCases.all + ClientVectorCases.all(.provider)

    static func provider(_ id: String, clause: String, _ title: String,
                         limits: @escaping @Sendable (inout HarnessLimits) -> Void = { _ in },
                         body: @escaping ClientCase.Body) -> ClientCase {
        ClientCase(id, clause: clause, title, kind: .provider, limits: limits, body: body)
    }

    /// A SEND the provider answered OK: the id it printed.
    @discardableResult
    static func send(_ h: ClientHarness, tag: String, extra: String = "") throws(CaseStop) -> PayloadID {
        try h.command("\(tag) SEND \(h.user) \(Array("hello \(tag)".utf8).hexString)\(extra)")
        let answer = try h.waitForAnswer(tag)
        guard answer.ok, let word = answer.words.first, let id = PayloadID(hex: word) else {
            throw .fail("`\(tag) SEND` was answered `\(answer.line)`, not `\(tag) OK <id>`" + h.stderrNote)
        }
        return id
    }

    /// Starts the provider and has it SEND once: its store connection, which becomes the
    /// one the case judges (`storeConnectionNumber`).
    @discardableResult
    static func connected(_ h: ClientHarness) throws(CaseStop) -> HarnessStore.Peer {
        try h.startClient()
        try send(h, tag: "s1")
        return try h.storeConnection()
    }

    /// Starts the provider and has it SEND once and PUSH once: both connections made.
    static func ordinaryFlow(_ h: ClientHarness) throws(CaseStop) {
        try h.startClient()
        let id = try send(h, tag: "s1")
        try h.command("p1 PUSH \(h.user) \(id.hex)")
        let answer = try h.waitForAnswer("p1")
        guard answer.ok else { throw .fail("`p1 PUSH` was answered `\(answer.line)`") }
        try h.pause(200)
    }

    static let helloCredential = provider("prov.hello.credential", clause: "7.1-4",
                                          "the provider's credential is made for the server it connects to") { h throws(CaseStop) in
        try ordinaryFlow(h)
        let check = HelloCredential.provider(h.providerKey)
        for (service, audience) in [(HarnessService.store, CredentialAudience.store), (.gateway, .gateway)] {
            guard case .hello(let hello)? = h.log.messages(.hello, to: service).first?.message, let credential = hello.credential else {
                throw .fail("no HELLO with a credential reached the \(service)")
            }
            do { _ = try check.verify(credential, for: audience, nowMs: Clocks.wallMilliseconds()) } catch {
                throw .fail("the credential sent to the \(service) does not verify for it: \(error)")
            }
        }
        return "store and gateway credentials verify for their audience"
    }

    static let freshCredential = provider("prov.hello.fresh", clause: "7.1-6",
                                          "each HELLO carries a new credential") { h throws(CaseStop) in
        try h.startClient()
        try send(h, tag: "s1")
        for peer in h.store.peers { peer.connection.close() }
        try h.pause(100)
        try send(h, tag: "s2")
        let credentials = h.log.messages(.hello, to: .store).compactMap { frame -> [UInt8]? in
            if case .hello(let hello)? = frame.message { return hello.credential }
            return nil
        }
        guard credentials.count >= 2 else { throw .fail("the provider did not connect to the store again") }
        guard Set(credentials).count == credentials.count else { throw .fail("the provider sent the same credential in two HELLOs") }
        return "\(credentials.count) HELLOs, \(credentials.count) credentials"
    }

    static let helloFirst = provider("prov.hello.first", clause: "5.1-1",
                                     "HELLO is the first frame, and nothing follows it before HELLO_OK") { h throws(CaseStop) in
        h.store.helloDelayMs = 400
        try h.startClient()
        try send(h, tag: "s1")
        return try FrameRules.helloFirst(h, service: .store, heldMs: 400)
    }

    static let headerBits = provider("prov.frame.header", clause: "2-5",
                                     "the flags byte (2-5) and the reserved u16 (2-6) are 0 in every frame the provider sends") { h throws(CaseStop) in
        try ordinaryFlow(h)
        return try FrameRules.headers(h)
    }

    static let fieldOrder = provider("prov.field.order", clause: "3.4-1",
                                     "each field appears at most once per body, in ascending tag order") { h throws(CaseStop) in
        try ordinaryFlow(h)
        return try FrameRules.fieldOrder(h)
    }

    static let fieldLengths = provider("prov.field.varint", clause: "3.1-4", "every field length is written in the fewest bytes") { h throws(CaseStop) in
        try ordinaryFlow(h)
        return try FrameRules.fieldLengths(h)
    }

    static let correlationMatch = provider("prov.correlation.match", clause: "5.3-2",
                                           "answers that come out of order go to their own commands") { h throws(CaseStop) in
        var first = true
        h.store.intercept = { request in
            guard case .send = request.message, first else { return .faithful }
            first = false
            return .later(ms: 500, .faithful)
        }
        try h.startClient()
        try h.command("a1 SEND \(h.user) 6161")
        try h.wait("the first SEND did not reach the store") { !h.log.messages(.send, to: .store).isEmpty }
        try h.command("a2 SEND \(h.user) 6262")
        let one = try h.waitForAnswer("a1"), two = try h.waitForAnswer("a2")
        for (answer, content) in [(one, [UInt8]("aa".utf8)), (two, [UInt8]("bb".utf8))] {
            guard answer.ok, let word = answer.words.first, let id = PayloadID(hex: word) else { throw .fail("answered `\(answer.line)`") }
            guard h.store.payloads[id]?.content == content else {
                throw .fail("`\(answer.tag)` was answered with the id of the other SEND")
            }
        }
        guard two.atMs <= one.atMs else { throw .fail("the held reply was not the later one") }
        return "the later command's answer first, each with its own id"
    }

    static let correlationUnique = provider("prov.correlation.unique", clause: "5.3-3",
                                            "no correlation id is used again while its request is outstanding") { h throws(CaseStop) in
        h.store.intercept = { request in
            if case .send = request.message { return .later(ms: 200, .faithful) }
            return .faithful
        }
        try h.startClient()
        for index in 1...5 { try h.command("u\(index) SEND \(h.user) 75") }
        for index in 1...5 { try h.waitForAnswer("u\(index)") }
        if let reuse = Outstanding.reusedCorrelation(h.log, service: .store) { throw .fail(reuse) }
        return "5 SENDs in flight, distinct ids"
    }

    static let inflight = provider("prov.inflight", clause: "5.3-1",
                                   "the provider keeps at most the granted max_inflight requests outstanding",
                                   limits: { $0.store.maxInflight = 2 }) { h throws(CaseStop) in
        h.store.intercept = { request in
            if case .send = request.message { return .later(ms: 150, .faithful) }
            return .faithful
        }
        try h.startClient()
        for index in 1...6 { try h.command("i\(index) SEND \(h.user) 69") }
        for index in 1...6 {
            let answer = try h.waitForAnswer("i\(index)", timeoutMs: 8_000)
            guard answer.ok else { throw .fail("`i\(index)` was answered `\(answer.line)`") }
        }
        let most = Outstanding.most(h.log, service: .store)
        guard most <= 2 else { throw .fail("the provider had \(most) requests outstanding with max_inflight 2") }
        return "6 SENDs, at most \(most) outstanding"
    }

    static let pingPong = provider("prov.ping.pong", clause: "4.3-1", "a PING from the store is answered PONG with its correlation id") { h throws(CaseStop) in
        let peer = try connected(h)
        h.storeServer.send(.ping, correlation: 0x52, to: peer)
        try h.wait("no PONG with correlation id 0x52", timeoutMs: 1_000) {
            h.log.messages(.pong, to: .store).contains { $0.header.correlation == 0x52 }
        }
        return "PONG"
    }

    static let errorStatus = provider("prov.error.status", clause: "4.5-1",
                                      "a request refused with ERROR is reported with its status") { h throws(CaseStop) in
        try h.startClient()
        try h.command("r1 RECALL \(PayloadID.random().hex)")
        let answer = try h.waitForAnswer("r1")
        guard answer.status == "NOT_FOUND" else { throw .fail("a RECALL refused NOT_FOUND was answered `\(answer.line)`") }
        return "ERROR NOT_FOUND"
    }

    static let pushFields = provider("prov.push.target", clause: "4.13-1",
                                     "a PUSH names its target kind and target together, and the id") { h throws(CaseStop) in
        try h.startClient()
        let id = PayloadID.random()
        try h.command("p1 PUSH \(h.user) \(id.hex)")
        let answer = try h.waitForAnswer("p1")
        guard case .push(let push)? = h.log.messages(.push, to: .gateway).first?.message else {
            throw .fail("no PUSH that decodes reached the gateway")
        }
        guard push.target == .user(h.user), push.id == id.bytes else {
            throw .fail("the PUSH names \(String(describing: push.target)) and \(push.id.hexString), not user \(h.user) and \(id.hex)")
        }
        guard answer.ok, answer.words == ["0", "1"] else { throw .fail("PUSH_ACK 0 written, 1 queued was answered `\(answer.line)`") }
        return "target user, answered `OK 0 1`"
    }
}
