import PushEventLoop
import PushNATS
import PushTestSupport
import Testing

@Suite(.ownThread, .enabled(if: NATSServer.testsEnabled, "nats-server is not installed"))
struct NATSCoreTests {
    @Test("a published message reaches a subscriber on another connection, its handler on the loop thread")
    func publishSubscribe() async throws {
        let server = try await startServer()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let sender = try connected(loop, server, name: "sender")
        let receiver = try connected(loop, server, name: "receiver")
        var received: [NATSMessage] = []
        var onLoopThread = true
        try receiver.subscribe("greetings.en") { message in
            onLoopThread = onLoopThread && loop.isInLoopThread
            received.append(message)
        }
        try settle(loop, receiver)
        try sender.publish("greetings.en", Array("hello".utf8), headers: [("X-Trace", "t1")])
        #expect(loop.run(until: { received.count == 1 }))
        #expect(onLoopThread)
        #expect(received.first?.subject == "greetings.en")
        #expect(received.first?.data == Array("hello".utf8))
        #expect(received.first?.header("X-Trace") == "t1")
        #expect(received.first?.status == nil)
        #expect(sender.statistics.outMsgs >= 1)
        #expect(receiver.statistics.inMsgs >= 1)
        sender.close()
        receiver.close()
    }

    @Test("several subscriptions, wildcards included, each get what matches; a cancelled one gets nothing more")
    func severalSubscriptions() async throws {
        let server = try await startServer()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let sender = try connected(loop, server)
        let receiver = try connected(loop, server)
        var exact: [String] = [], star: [String] = [], tail: [String] = [], other: [String] = []
        try receiver.subscribe("a.b") { exact.append($0.subject) }
        let starSubscription = try receiver.subscribe("a.*") { star.append($0.subject) }
        try receiver.subscribe("a.>") { tail.append($0.subject) }
        try receiver.subscribe("z") { other.append($0.subject) }
        try settle(loop, receiver)
        for subject in ["a.b", "a.c", "a.b.c", "z"] { try sender.publish(subject, [1]) }
        #expect(loop.run(until: { exact.count == 1 && star.count == 2 && tail.count == 3 && other.count == 1 }))
        #expect(star == ["a.b", "a.c"])
        #expect(tail == ["a.b", "a.c", "a.b.c"])
        starSubscription.cancel()
        #expect(!starSubscription.isActive)
        try settle(loop, receiver)
        try sender.publish("a.d", [2])
        #expect(loop.run(until: { tail.count == 4 }))
        try settle(loop, sender)
        #expect(star.count == 2)
    }

    @Test("request/reply: the responder's reply (data and headers) completes the request")
    func requestReply() async throws {
        let server = try await startServer()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let client = try connected(loop, server)
        let responder = try connected(loop, server)
        try responder.subscribe("svc.reverse") { message in
            guard let reply = message.reply else { return }
            try? responder.publish(reply, message.data.reversed(), headers: [("X-Seen", message.header("X-In") ?? "")])
        }
        try settle(loop, responder)
        let answers = try (0..<3).map { index in
            try wait(loop) { client.request("svc.reverse", [1, 2, UInt8(index)], headers: [("X-In", "v\(index)")], timeout: .seconds(5), completion: $0) }.get()
        }
        #expect(answers.map(\.data) == [[0, 2, 1], [1, 2, 1], [2, 2, 1]])
        #expect(answers.map { $0.header("X-Seen") } == ["v0", "v1", "v2"])
        let inbox = client.newInbox()
        #expect(inbox.hasPrefix("_INBOX.") && inbox != client.newInbox())
    }

    @Test("a request nobody answers in time fails with .timeout; one to a subject without subscribers with .noResponders")
    func requestTimeoutAndNoResponders() async throws {
        let server = try await startServer()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let client = try connected(loop, server)
        let silent = try connected(loop, server)
        try silent.subscribe("svc.silent") { _ in }
        try settle(loop, silent)
        let started = ContinuousClock.now
        let timedOut = try wait(loop) { client.request("svc.silent", [1], timeout: .milliseconds(200), completion: $0) }
        #expect(timedOut.failure == .timeout)
        #expect(ContinuousClock.now - started >= .milliseconds(190))
        let nobody = try wait(loop) { client.request("svc.nobody", [1], timeout: .seconds(5), completion: $0) }
        #expect(nobody.failure == .noResponders)
    }

    @Test("a burst of 1,000 messages arrives complete and in order")
    func burst() async throws {
        let server = try await startServer()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let sender = try connected(loop, server)
        let receiver = try connected(loop, server)
        var received: [Int] = []
        try receiver.subscribe("burst") { message in
            received.append(Int(message.data[0]) << 8 | Int(message.data[1]))
        }
        try settle(loop, receiver)
        for index in 0..<1000 {
            try sender.publish("burst", [UInt8(index >> 8), UInt8(index & 0xFF)] + Array(repeating: 7, count: 200))
        }
        #expect(loop.run(until: { received.count == 1000 }))
        #expect(received == Array(0..<1000))
    }

    @Test("close() with a request pending fails it with .notConnected; publishing after close throws .notConnected")
    func closeFailsPending() async throws {
        let server = try await startServer()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let client = try connected(loop, server)
        let silent = try connected(loop, server)
        try silent.subscribe("svc.silent") { _ in }
        try settle(loop, silent)
        var outcome: Result<NATSMessage, NATSError>?
        client.request("svc.silent", [1], timeout: .seconds(30)) { outcome = $0 }
        client.close()
        #expect(outcome == nil)  // completions never run inside the call
        #expect(loop.run(until: { outcome != nil }, timeoutSeconds: 5))
        #expect(outcome?.failure == .notConnected)
        #expect(!client.isConnected)
        #expect(throws: NATSError.notConnected) { try client.publish("x", [1]) }
        client.close()  // idempotent
    }

    @Test("bad server URLs and bad subjects are refused before anything is sent")
    func validation() async throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        for url in ["", "127.0.0.1:4222", "nats://:4222", "nats://host", "nats://host:0", "nats://host:99999", "nats://ho st:1", "http://h:1"] {
            #expect(throws: NATSError.invalidURL(url)) { try NATSConnection(loop: loop, servers: [url], name: "t") }
        }
        #expect(throws: NATSError.invalidURL("no servers")) { try NATSConnection(loop: loop, servers: [], name: "t") }
        // Nothing listens on this port: the connection is made anyway and keeps trying.
        let port = try freeLoopbackPort()
        let connection = try NATSConnection(loop: loop, servers: ["nats://127.0.0.1:\(port)"], name: "t")
        #expect(!connection.isConnected)
        for subject in ["", "a..b", ".a", "a.", "a b", "a\tb", "a\r\nPUB x 1"] {
            #expect(throws: NATSError.invalidSubject(subject)) { try connection.publish(subject, [1]) }
        }
        #expect(throws: NATSError.invalidSubject("a.>.b")) { try connection.subscribe("a.>.b") { _ in } }
        #expect(throws: NATSError.invalidSubject("a.*")) { try connection.publish("a.*", [1]) }
        #expect(throws: NATSError.self) { try connection.publish("ok", [1], headers: [("X-Bad", "a\r\nb")]) }
        connection.close()
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
