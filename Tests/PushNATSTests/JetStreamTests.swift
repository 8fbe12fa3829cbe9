import PushClock
import PushEventLoop
import PushNATS
import PushTestSupport
import Testing

@Suite(.ownThread, .enabled(if: NATSServer.testsEnabled, "nats-server is not installed"))
struct JetStreamTests {
    @Test("ensureStream is idempotent, and updates a stream whose config changed (max age)")
    func ensureStream() async throws {
        let server = try await startServer()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let js = JetStream(connection: try connected(loop, server))
        var config = StreamConfig(name: "ROUTES", subjects: ["routes.>"], maxMessagesPerSubject: 1, maxAge: .seconds(3600))
        try wait(loop) { js.ensureStream(config, completion: $0) }.get()
        try wait(loop) { js.ensureStream(config, completion: $0) }.get()
        #expect(try js.info(loop, stream: "ROUTES").contains("\"max_age\":3600000000000"))
        config.maxAge = .seconds(7200)
        try wait(loop) { js.ensureStream(config, completion: $0) }.get()
        let info = try js.info(loop, stream: "ROUTES")
        #expect(info.contains("\"max_age\":7200000000000"))
        #expect(info.contains("\"allow_direct\":true"))
        #expect(info.contains("\"storage\":\"file\""))
        // A change the server refuses comes back as its JetStream error.
        let refused = try wait(loop) { js.ensureStream(StreamConfig(name: "OTHER", subjects: ["routes.x"]), completion: $0) }
        guard case .jetStream(let code, let errorCode, let description)? = refused.failure else {
            Issue.record("overlapping subjects were accepted: \(refused)")
            return
        }
        #expect(code == 400 && errorCode > 0 && !description.isEmpty)
    }

    @Test("publish returns the stream sequence; lastMessage returns the newest on a subject, nil for none")
    func publishAndLastMessage() async throws {
        let server = try await startServer()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let js = JetStream(connection: try connected(loop, server))
        try wait(loop) { js.ensureStream(StreamConfig(name: "KV", subjects: ["kv.>"]), completion: $0) }.get()
        let first = try wait(loop) { js.publish("kv.a", [1], completion: $0) }.get()
        let second = try wait(loop) { js.publish("kv.a", [2], completion: $0) }.get()
        let third = try wait(loop) { js.publish("kv.b", [3], completion: $0) }.get()
        #expect([first, second, third] == [1, 2, 3])
        let last = try wait(loop) { js.lastMessage(stream: "KV", subject: "kv.a", completion: $0) }.get()
        #expect(last?.withoutStoredTime == StoredMessage(sequence: 2, subject: "kv.a", data: [2]))
        // The server's time stamp, near this host's clock.
        let nowMs = Clocks.wallMilliseconds()
        #expect(last?.storedAtMs.map { $0 + 60_000 > nowMs && $0 < nowMs + 60_000 } == true, "\(String(describing: last))")
        let none = try wait(loop) { js.lastMessage(stream: "KV", subject: "kv.zzz", completion: $0) }.get()
        #expect(none == nil)
        let outside = try wait(loop) { js.publish("nostream.a", [1], completion: $0) }
        #expect(outside.failure == .noResponders)
    }

    @Test("expectedLastSubjectSequence: 0 on an empty subject succeeds, a stale one fails with isWrongLastSequence")
    func expectedLastSequence() async throws {
        let server = try await startServer()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let js = JetStream(connection: try connected(loop, server))
        try wait(loop) { js.ensureStream(StreamConfig(name: "KV", subjects: ["kv.>"]), completion: $0) }.get()
        let created = try wait(loop) { js.publish("kv.a", [1], expectedLastSubjectSequence: 0, completion: $0) }.get()
        let again = try wait(loop) { js.publish("kv.a", [2], expectedLastSubjectSequence: 0, completion: $0) }
        #expect(again.failure?.isWrongLastSequence == true)
        _ = try wait(loop) { js.publish("kv.other", [9], completion: $0) }.get()
        let next = try wait(loop) { js.publish("kv.a", [3], expectedLastSubjectSequence: created, completion: $0) }.get()
        #expect(next == 3)
        let stale = try wait(loop) { js.publish("kv.a", [4], expectedLastSubjectSequence: created, completion: $0) }
        #expect(stale.failure?.isWrongLastSequence == true)
        #expect(NATSError.timeout.isWrongLastSequence == false)
    }

    @Test("max_msgs_per_subject 1 keeps only the newest message of each subject")
    func onePerSubject() async throws {
        let server = try await startServer()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let js = JetStream(connection: try connected(loop, server))
        try wait(loop) { js.ensureStream(StreamConfig(name: "ONE", subjects: ["one.>"], maxMessagesPerSubject: 1), completion: $0) }.get()
        for value in UInt8(1)...3 { _ = try wait(loop) { js.publish("one.x", [value], completion: $0) }.get() }
        _ = try wait(loop) { js.publish("one.y", [9], completion: $0) }.get()
        #expect(try js.info(loop, stream: "ONE").contains("\"messages\":2"))
        let last = try wait(loop) { js.lastMessage(stream: "ONE", subject: "one.x", completion: $0) }.get()
        #expect(last?.withoutStoredTime == StoredMessage(sequence: 3, subject: "one.x", data: [3]))
    }

    @Test("stream data survives a nats-server restart")
    func survivesRestart() async throws {
        let server = try await startServer()
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let connection = try connected(loop, server)
        let log = EventLog(connection)
        let js = JetStream(connection: connection)
        try wait(loop) { js.ensureStream(StreamConfig(name: "KEEP", subjects: ["keep.>"]), completion: $0) }.get()
        let sequence = try wait(loop) { js.publish("keep.me", Array("durable".utf8), completion: $0) }.get()
        server.stop()
        try server.restart()
        #expect(loop.run(until: { log.events.contains(.reconnected) }))
        // JetStream may need a moment after the restart to serve the stream again.
        var last: StoredMessage?
        for _ in 0..<50 where last == nil {
            last = try? wait(loop) { js.lastMessage(stream: "KEEP", subject: "keep.me", completion: $0) }.get()
            if last == nil { loop.run(until: { false }, timeoutSeconds: 0.1) }
        }
        #expect(last?.withoutStoredTime == StoredMessage(sequence: sequence, subject: "keep.me", data: Array("durable".utf8)))
    }
}
