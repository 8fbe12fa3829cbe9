import Glibc
import PushWire

/// What a provider writes and what it must refuse: its HELLO's size and role (5.1-7,
/// 4.1-2), SEND's target (4.17-2), requests it does not serve (4.1-4), a malformed reply
/// (5.6-3), and its key file's forms and modes (7.5-2).
enum ProviderRequestCases {
    static let all: [ClientCase] = [helloSize, role, sendTarget, notServed, malformedReply, keyFileForm, keyFileMode]

    static let helloSize = ProviderCases.provider("prov.hello.size", clause: "5.1-7",
                                                  "every HELLO fits in 1024 bytes, header included") { h throws(CaseStop) in
        try ProviderCases.ordinaryFlow(h)
        for service in [HarnessService.gateway, .store] {
            if let error = h.log.unframed(service).first { throw .fail("the \(service) refused the provider's bytes: \(error)") }
            for hello in h.log.messages(.hello, to: service) where hello.header.frameLength > 1_024 {
                throw .fail("a HELLO to the \(service) takes \(hello.header.frameLength) bytes")
            }
        }
        return "HELLOs of \(h.log.received().filter { $0.header.type == .hello }.map { "\($0.header.frameLength)" }.joined(separator: ", ")) bytes"
    }

    static let role = ProviderCases.provider("prov.hello.role", clause: "4.1-2",
                                             "every HELLO the provider sends, to either server, names role 2 (provider)") { h throws(CaseStop) in
        try ProviderCases.ordinaryFlow(h)
        let hellos = h.log.received().filter { $0.header.type == .hello }
        for frame in hellos {
            guard case .hello(let hello)? = frame.message, hello.role == .provider else {
                throw .fail("a HELLO to the \(frame.service) does not name role provider")
            }
        }
        return "\(hellos.count) HELLOs, role provider"
    }

    static let sendTarget = ProviderCases.provider("prov.send.target", clause: "4.17-2",
                                                   "`SEND user hex` asks for a push to that user: no target, or kind 2 naming the user") { h throws(CaseStop) in
        try h.startClient()
        try ProviderCases.send(h, tag: "s1")
        guard case .send(let send)? = h.log.messages(.send, to: .store).first?.message else { throw .fail("no SEND that decodes reached the store") }
        guard send.user == h.user else { throw .fail("the SEND names user \(send.user), not \(h.user)") }
        if let target = send.target, target != .user(h.user) {
            throw .fail("the SEND targets \(target), not the user \(h.user)")
        }
        return send.target == nil ? "no target" : "target kind 2, the user"
    }

    static let notServed = ProviderCases.provider("prov.request.not-served", clause: "4.1-4",
                                                  "a FETCH sent to the provider, which serves only PING, is answered ERROR BAD_REQUEST and the connection stays") { h throws(CaseStop) in
        let peer = try ProviderCases.connected(h)
        let correlation: UInt32 = 0x0300_0001
        h.storeServer.send(.fetch(Fetch(id: PayloadID.random(), token: nil)), correlation: correlation, to: peer)
        try h.expectError(.badRequest, answering: correlation, on: .store)
        try ProviderCases.send(h, tag: "s2")
        guard h.log.messages(.send, to: .store).last?.connection == h.storeConnectionNumber else {
            throw .fail("the provider left the connection after refusing a request")
        }
        return "ERROR BAD_REQUEST, connection kept"
    }

    static let malformedReply = ProviderCases.provider("prov.reply.malformed", clause: "5.6-3",
                                                       "a SEND_OK without its id fails the SEND; no ERROR is sent about a reply and the connection stays") { h throws(CaseStop) in
        try ProviderCases.connected(h)
        let body = RawFrame.field(.expiresAt, RawFrame.bigEndian(UInt64(Int64.max)))
        h.interceptNextSend { .rawReply(RawFrame.frame(.sendOK, correlation: $0.correlation, body: body)) }
        try h.command("m1 SEND \(h.user) 6d")
        let answer = try h.waitForAnswer("m1")
        guard !answer.ok else { throw .fail("a SEND answered by a SEND_OK without an id was reported `\(answer.line)`") }
        try h.pause(300)
        if h.log.messages(.error, to: .store).contains(where: { $0.connection == h.storeConnectionNumber }) {
            throw .fail("the provider sent ERROR about a malformed reply")
        }
        guard h.log.closedAt(.store, connection: h.storeConnectionNumber) == nil else {
            throw .fail("the provider closed the connection over a malformed reply")
        }
        return "`\(answer.line)`, no ERROR, connection kept"
    }

    static let keyFileForm = ProviderCases.provider("prov.key.file-form", clause: "7.5-2",
                                                    "a provider key file in uppercase hex with whitespace in it is read as the same key") { h throws(CaseStop) in
        let hex = h.providerKey.fileText.filter { !$0.isWhitespace }.uppercased()
        let spaced = stride(from: 0, to: hex.count, by: 16).map { String(hex.dropFirst($0).prefix(16)) }.joined(separator: " \n\t")
        try h.writeFile("provider.key", "\n " + spaced + "\n\n")
        try h.startClient()
        try ProviderCases.send(h, tag: "s1")
        return "connected with the key"
    }

    static let keyFileMode = ProviderCases.provider("prov.key.file-mode", clause: "7.5-2",
                                                    "a provider key file that others may read (mode 0644) is refused: no HELLO is made with it") { h throws(CaseStop) in
        try h.setFileMode("provider.key", 0o644)
        try h.startClient()
        _ = h.sendIfRunning("k1 SEND \(h.user) 6b")
        try h.pause(1_500, clientMayExit: true)
        if let hello = h.log.received().first(where: { $0.header.type == .hello }) {
            throw .fail("the provider connected to the \(hello.service) with a key file of mode 0644")
        }
        if let answer = h.answer("k1"), answer.ok { throw .fail("`k1 SEND` was answered `\(answer.line)` with a key file of mode 0644") }
        return h.clientExitStatus.map { "exited with status \($0)" } ?? "running, and connected nowhere"
    }
}
