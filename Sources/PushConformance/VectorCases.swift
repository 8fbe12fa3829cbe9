import PushWire

/// One case per malformed or incomplete golden vector (protocol/vectors, SPEC.md section
/// 9), sent over a live connection, with the outcome the vector documents:
///
/// - fatal S: GOAWAY S, then close ([5.6-1]);
/// - request_error S (a request or an unknown type): ERROR S echoing the frame's
///   correlation id, and the connection stays open (a PING still answers) ([5.6-2]); a
///   HELLO is sent as the opening frame, so its ERROR is followed by the close of a
///   failed handshake ([5.1-3]);
/// - rejected S (a reply or one-way message): no answer at all, and a PING still
///   answers ([5.6-3]); a malformed GOAWAY still ends the connection;
/// - incomplete: no answer and no close while the frame waits for its bytes ([2-12]).
///
/// Vectors that decode to a message are the codec tests' business: their outcome on a
/// live connection depends on state the vector does not give.
enum VectorCases {
    static func cases(for loaded: VectorSource.Loaded) -> [ConformanceCase] {
        var cases: [ConformanceCase] = []
        for (index, problem) in loaded.problems.enumerated() {
            cases.append(.unavailable("vector.unreadable-\(index + 1)", clause: "9-2", "a vector file that does not parse", reason: "cannot read \(problem)"))
        }
        let judged = loaded.vectors.filter {
            if case .message = $0.expectation { false } else { true }
        }
        guard !judged.isEmpty else {
            let reason = loaded.directory.map { "no malformed vectors in \($0) (--vectors); without --vectors the built-in ones are used" }
                ?? "this build has no vectors built in; pass --vectors DIR"
            return cases + [.unavailable("vector.all", clause: "9-1", "the golden vectors", reason: reason)]
        }
        for vector in judged {
            let clause = vector.clauses.first.flatMap { SpecClauses.all.contains($0) ? $0 : nil } ?? "9-1"
            cases.append(ConformanceCase("vector.\(vector.name)", clause: clause, title(vector)) { ctx throws(CaseStop) in
                try check(vector, ctx)
            })
        }
        return cases
    }

    static func title(_ vector: TestVector) -> String {
        switch vector.expectation {
        case .fatal(let status): "vector \(vector.name): fatal \(status.name)"
        case .requestError(let status): "vector \(vector.name): request error \(status.name)"
        case .rejected(let status): "vector \(vector.name): rejected (\(status.name)), never answered"
        case .incomplete: "vector \(vector.name): incomplete"
        case .message: "vector \(vector.name)"
        }
    }

    static func check(_ vector: TestVector, _ ctx: CaseContext) throws(CaseStop) -> String {
        guard vector.bytes.count >= 3 else { return try incomplete(vector, ctx) }
        let rawType = vector.bytes[2]
        let type = MessageType(rawValue: rawType)
        switch vector.expectation {
        case .message:
            throw .skip("a well-formed vector; judged by the codec tests")
        case .incomplete:
            return try incomplete(vector, ctx)
        case .fatal(let status):
            let session = try ctx.storeDevice(maxFrame: vector.maxFrame)
            try session.sendRaw(vector.bytes, "the vector")
            try Expect.goawayThenClose(session, status, "vector \(vector.name)")
            return "GOAWAY \(status.name), closed"
        case .requestError where type == .hello && vector.bytes.count > CaseContext.maxFrameBeforeHello:
            // Before HELLO_OK a server reads frames of at most 1024 bytes (v1.1): the length
            // is refused before the body is read, so the body's fault is never reached.
            let session = try ctx.connectStore()
            try session.sendRaw(vector.bytes, "the vector")
            try Expect.goawayThenClose(session, .frameTooLarge, "vector \(vector.name) (\(vector.bytes.count) bytes) as the opening HELLO")
            return "\(vector.bytes.count) bytes before HELLO_OK: GOAWAY FRAME_TOO_LARGE, closed"
        case .requestError(let status) where type == .hello:
            let session = try ctx.connectStore()
            try Expect.refusedRaw(session, vector.bytes, status, "vector \(vector.name) as the opening HELLO")
            let after = try session.expectClosed("ERROR refused the opening HELLO")
            try Expect.that(after.isEmpty, "after refusing HELLO the server still sent \(after.map(describe).joined(separator: ", "))")
            return "ERROR \(status.name) with its correlation id, then closed [5.1-3]"
        case .requestError(let status):
            let session: WireSession
            if type == .push {
                session = try ctx.gatewayProvider(maxFrame: vector.maxFrame)
            } else {
                session = try ctx.storeDevice(maxFrame: vector.maxFrame)
            }
            try Expect.refusedRaw(session, vector.bytes, status, "vector \(vector.name)")
            try session.expectAlive("ERROR \(status.name)")
            return "ERROR \(status.name) echoing correlation \(RawFrame.correlation(of: vector.bytes) ?? 0); PING still answered (\(session.name))"
        case .rejected where type == .goaway:
            let session = try ctx.storeDevice(maxFrame: vector.maxFrame)
            try session.sendRaw(vector.bytes, "the vector")
            let after = try session.expectClosed("a malformed GOAWAY")
            try Expect.that(!after.contains { if case .error = $0 { true } else { false } }, "a malformed GOAWAY was answered with ERROR [5.6-3]")
            return "no ERROR; the malformed GOAWAY ended the connection"
        case .rejected:
            let session = try ctx.storeDevice(maxFrame: vector.maxFrame)
            try session.sendRaw(vector.bytes, "the vector")
            try session.expectSilence(ms: ctx.quietMs, "a malformed \(type?.specName ?? "reply")")
            try session.expectAlive("a malformed \(type?.specName ?? "reply")")
            return "no answer to a malformed \(type?.specName ?? "reply"); PING still answered"
        }
    }

    /// The bytes are sent after the handshake; the server must wait for the rest of the
    /// frame, neither answering nor closing.
    static func incomplete(_ vector: TestVector, _ ctx: CaseContext) throws(CaseStop) -> String {
        let session = try ctx.storeDevice(maxFrame: vector.maxFrame)
        // A PONG now would become part of the unfinished frame.
        session.answersPings = false
        try session.sendRaw(vector.bytes, "the vector")
        try session.expectSilence(ms: ctx.quietMs, "\(vector.bytes.count) bytes of an unfinished frame")
        return "\(vector.bytes.count) bytes: no answer, connection open"
    }
}
