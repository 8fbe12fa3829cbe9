import PushWire

/// Small checks the cases share, each failing with a sentence that names what was
/// expected and what came instead.
enum Expect {
    /// `message` must be ERROR with `status`.
    static func error(_ message: Message, _ status: Status, _ what: String) throws(CaseStop) {
        guard case .error(let error) = message, error.status == status else {
            throw .fail("\(what): expected ERROR \(status.name), got \(describe(message))")
        }
    }

    /// Sends `message` and requires ERROR `status` echoing its correlation id.
    static func refused(_ session: WireSession, _ message: Message, _ status: Status, _ what: String) throws(CaseStop) {
        var id = try session.send(message)
        var frame = try session.nextFrame(waitingFor: "ERROR \(status.name) for \(what)")
        var answer = try session.decode(frame, "ERROR \(status.name) for \(what)")
        var waited: Int64 = 0
        while status != .rateLimited, WireSession.isHeldBack(message, answer), waited < WireSession.failedTokenWindowMs {
            Pause.sleep(ms: 1_000)
            waited += 1_000
            id = try session.send(message)
            frame = try session.nextFrame(waitingFor: "ERROR \(status.name) for \(what)")
            answer = try session.decode(frame, "ERROR \(status.name) for \(what)")
        }
        try error(answer, status, what)
        guard frame.header.correlation == id else {
            throw .fail("\(what): ERROR carried correlation \(frame.header.correlation), the request had \(id)")
        }
    }

    /// Sends raw request bytes and requires ERROR `status` echoing their correlation id.
    static func refusedRaw(_ session: WireSession, _ bytes: [UInt8], _ status: Status, _ what: String) throws(CaseStop) {
        try session.sendRaw(bytes, what)
        let frame = try session.nextFrame(waitingFor: "ERROR \(status.name) for \(what)")
        let answer = try session.decode(frame, "ERROR \(status.name) for \(what)")
        try error(answer, status, what)
        if let id = RawFrame.correlation(of: bytes), frame.header.correlation != id {
            throw .fail("\(what): ERROR carried correlation \(frame.header.correlation), the frame had \(id)")
        }
    }

    /// A HELLO refused with ERROR `status`, after which the server closes ([5.1-3]).
    static func helloRefused(_ session: WireSession, _ hello: Hello, _ status: Status, _ what: String) throws(CaseStop) {
        let answer = try session.hello(hello)
        try error(answer, status, what)
        let after = try session.expectClosed("ERROR \(status.name) refused HELLO (\(what))")
        if !after.isEmpty { throw .fail("after refusing HELLO (\(what)) the server still sent \(after.map(describe).joined(separator: ", "))") }
    }

    /// The next frame is GOAWAY `status`, and the server then closes without sending more.
    @discardableResult
    static func goawayThenClose(_ session: WireSession, _ status: Status, _ what: String) throws(CaseStop) -> Goaway {
        let (header, message) = try session.next(waitingFor: "GOAWAY \(status.name) for \(what)")
        guard case .goaway(let goaway) = message, goaway.status == status else {
            throw .fail("\(what): expected GOAWAY \(status.name), got \(describe(message))")
        }
        guard header.correlation == 0 else {
            throw .fail("\(what): GOAWAY carried correlation \(header.correlation); one-way messages carry 0 [2-9]")
        }
        let after = try session.expectClosed("GOAWAY \(status.name)")
        if !after.isEmpty { throw .fail("after GOAWAY \(status.name) the server still sent \(after.map(describe).joined(separator: ", "))") }
        return goaway
    }

    static func equal<T: Equatable>(_ actual: T, _ expected: T, _ what: String) throws(CaseStop) {
        guard actual == expected else { throw .fail("\(what): expected \(expected), got \(actual)") }
    }

    static func that(_ condition: Bool, _ failure: @autoclosure () -> String) throws(CaseStop) {
        guard condition else { throw .fail(failure()) }
    }
}
